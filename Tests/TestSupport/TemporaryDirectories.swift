import Foundation
import Synchronization

/// Folders the tests make under the system's temporary folder. Every one is removed when the test process exits;
/// a crashed or killed run leaves its folders, stores and logs behind to look at.
public enum TemporaryDirectories {
    private static let made = Mutex<[String]?>(nil)

    /// Makes a new folder named `prefix` and a UUID (with `subfolders` inside it) and returns its path.
    public static func make(_ prefix: String, subfolders: [String] = []) -> String {
        let path = NSTemporaryDirectory() + prefix + UUID().uuidString
        for folder in [path] + subfolders.map({ path + "/" + $0 }) {
            try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        made.withLock { paths in
            if paths == nil {
                paths = []
                atexit { TemporaryDirectories.removeAll() }
            }
            paths?.append(path)
        }
        return path
    }

    private static func removeAll() {
        for path in made.withLock({ $0 ?? [] }) { try? FileManager.default.removeItem(atPath: path) }
    }
}

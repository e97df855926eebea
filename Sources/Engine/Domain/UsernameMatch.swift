/// How a typed username finds its user: without regard to the case of ASCII letters, so that `Anna@Acme.example`
/// signs in as `anna@acme.example`. The name keeps the case it was given, for display.
///
/// Only ASCII letters fold (`ZOË` and `zoë` stay two names): both stores compare with functions that fold
/// ASCII alone whatever the server's locale (SQLite's `lower()`, PostgreSQL's `translate()`), so the rule is
/// the same on each, and the same in the caches and throttles in front of them.
public enum UsernameMatch {
    /// The form usernames are compared in.
    public static func key(_ username: String) -> String {
        var folded = String.UnicodeScalarView()
        for scalar in username.unicodeScalars {
            if (65...90).contains(scalar.value), let lower = Unicode.Scalar(scalar.value + 32) {
                folded.append(lower)
            } else {
                folded.append(scalar)
            }
        }
        return String(folded)
    }

    /// The user a typed name signs in as, among the candidates whose names match it without regard to case
    /// (sorted by the store, exact match first): the exact match, else the only one. Two names that differ only
    /// in case (kept apart from before the rule) answer only to their exact spelling.
    public static func pick(_ candidates: [User], typed: String) -> User? {
        guard let first = candidates.first else { return nil }
        if first.username == typed { return first }
        return candidates.count == 1 ? first : nil
    }
}

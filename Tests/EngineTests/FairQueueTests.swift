import Engine
import Testing

@Suite("Fair queue")
struct FairQueueTests {
    @Test("Keys take turns: a key with many jobs waiting delays another key's job by one job, not by all of them")
    func turns() {
        var queue = FairQueue<String, String>(capacityPerKey: 100)
        for index in 0..<5 { _ = queue.enqueue("a\(index)", key: "a") }
        _ = queue.enqueue("b0", key: "b")
        _ = queue.enqueue("c0", key: "c")
        _ = queue.enqueue("b1", key: "b")
        var order: [String] = []
        while let job = queue.next() { order.append(job) }
        #expect(order == ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"])
        #expect(queue.count == 0 && queue.next() == nil)
    }

    @Test("Bounded per key; a job taken out before it ran is gone, and its key's turn with it when it was the last")
    func boundsAndRemoval() {
        var queue = FairQueue<String, Int>(capacityPerKey: 2)
        let first = queue.enqueue(1, key: "a")
        #expect(queue.enqueue(2, key: "a") != nil)
        #expect(queue.enqueue(3, key: "a") == nil)
        #expect(queue.enqueue(4, key: "b") != nil)
        #expect(queue.remove(first!, key: "a") == 1)
        #expect(queue.remove(first!, key: "a") == nil)
        #expect(queue.count("a") == 1 && queue.count == 2)
        let only = queue.enqueue(5, key: "c")
        #expect(queue.remove(only!, key: "c") == 5)
        var order: [Int] = []
        while let job = queue.next() { order.append(job) }
        #expect(order == [2, 4])
    }
}

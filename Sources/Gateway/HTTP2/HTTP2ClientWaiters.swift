import NIOCore

/// Who waits for a client stream's answer: a single request's promise (with its own deadline timer), or one
/// request of a batch. A batch's streams share one `BatchAnswers` instead of a closure each (a closure and its
/// captures per push were the largest single cost of sending a batch).
enum Waiter {
    case single(EventLoopPromise<HTTP2Message>, deadline: Scheduled<Void>?)
    case batch(BatchAnswers, index: Int)

    /// Completes the wait (on the connection's event loop), cancelling a single request's deadline timer.
    func complete(_ result: Result<HTTP2Message, HTTP2EngineError>) {
        switch self {
        case .single(let promise, let deadline):
            deadline?.cancel()
            promise.completeWith(result.mapError { $0 as any Error })
        case .batch(let batch, let index):
            batch.complete(index, result)
        }
    }
}

/// A batch's answers as they come; its promise completes, in the order of the requests, with the last one.
/// Used on the connection's event loop only.
final class BatchAnswers {
    private var answers: [HTTP2Answer?]
    private(set) var remaining: Int
    private let started = NIODeadline.now()
    private let onAnswer: ((Int, HTTP2Message?) -> Void)?
    private let promise: EventLoopPromise<[HTTP2Answer]>
    /// One deadline for the whole batch, cancelled with its last answer.
    var timer: Scheduled<Void>?

    init(count: Int, onAnswer: ((Int, HTTP2Message?) -> Void)?, promise: EventLoopPromise<[HTTP2Answer]>) {
        answers = [HTTP2Answer?](repeating: nil, count: count)
        remaining = count
        self.onAnswer = onAnswer
        self.promise = promise
    }

    /// Records request `index`'s answer or failure; a second one for the same request is ignored.
    func complete(_ index: Int, _ result: Result<HTTP2Message, HTTP2EngineError>) {
        guard answers[index] == nil else { return }
        answers[index] = HTTP2Answer(result: result, latency: NIODeadline.now() - started)
        remaining -= 1
        onAnswer?(index, try? result.get())
        if remaining == 0 {
            timer?.cancel()
            promise.succeed(answers.map { $0! })
        }
    }
}

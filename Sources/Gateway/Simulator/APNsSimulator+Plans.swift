import NIOCore

/// How the simulator answers, whichever API a request is for: the faults every request meets first, and the plan
/// carried out after the faults' delay and latency.
extension APNsSimulator {
    /// What the simulator does with a request instead of, or as, its answer.
    enum Plan {
        case hang, refuse, drop
        case goAway(String)
        case answer(Int, [HTTP2Header], ByteBuffer?, announce: UInt32?)
    }

    /// The faults every request meets first, whichever API it is for (taken from the counters as they apply).
    static func fault(_ state: inout State, _ request: HTTP2ServerRequest, _ connectionID: ObjectIdentifier) -> Plan? {
        // After GOAWAY a server processes nothing above the last stream it named.
        if let last = state.goAwayLastStream[connectionID], request.streamID > last { return .refuse }
        if state.faults.hangNext > 0 {
            state.faults.hangNext -= 1
            return .hang
        }
        if state.faults.refuseNext > 0 {
            state.faults.refuseNext -= 1
            return .refuse
        }
        if state.faults.dropNext > 0 {
            state.faults.dropNext -= 1
            return .drop
        }
        if let reason = state.faults.goAwayReason {
            state.faults.goAwayReason = nil
            state.goAwayLastStream[connectionID] = request.streamID - 2
            return .goAway(reason)
        }
        return nil
    }

    /// Carries out a plan after the faults' delay and latency.
    func execute(_ plan: Plan, _ request: HTTP2ServerRequest, _ connection: HTTP2ServerConnection) {
        var generator = SystemRandomNumberGenerator()
        let delay = state.withLock { $0.faults }.answerDelay(using: &generator)
        let execute: @Sendable () -> Void = {
            switch plan {
            case .hang: break
            case .refuse: request.reset(errorCode: HTTP2ErrorCode.refusedStream)
            case .drop: connection.drop()
            case .goAway(let reason):
                connection.goAway(
                    errorCode: HTTP2ErrorCode.noError,
                    debugData: #"{"reason":"\#(reason)"}"#,
                    lastStreamID: request.streamID - 2
                )
            case .answer(let status, let headers, let body, let announce):
                if let announce { connection.announce(maxConcurrentStreams: announce) }
                var all = headers
                if body != nil { all.append(HTTP2Header("content-type", "application/json")) }
                request.respond(status: status, headers: all, body: body)
            }
        }
        if delay > 0 {
            request.eventLoop.scheduleTask(in: SimulatorFaults.timeAmount(milliseconds: delay)) { execute() }
        } else {
            execute()
        }
    }
}

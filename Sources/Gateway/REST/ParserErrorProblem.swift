import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Answers an HTTP/1.1 request that the parser refused (an unknown method, a malformed request line or header)
/// with a 400 problem body and closes the connection, as every other error is answered. Hummingbird alone
/// answers such requests with an empty 400.
final class ParserErrorProblem: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var answered = false

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        guard !answered else { return }
        answered = true
        let detail =
            parserError == .invalidMethod
            ? "the request method is not one this server knows" : "the request is not valid HTTP/1.1"
        let body = ByteBuffer(
            string: #"{"detail":"\#(detail)","status":400,"title":"Bad Request","#
                + #""type":"urn:impulse-broker:problem:malformed-request"}"#
        )
        let head = HTTPResponse(
            status: .badRequest,
            headerFields: [
                .contentType: "application/problem+json", .contentLength: String(body.readableBytes),
                .connection: "close", .cacheControl: "no-store",
            ]
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}

// swift-tools-version:6.2
import PackageDescription

/// `BROKER_SANITIZE=address` instruments this package's own modules with AddressSanitizer (scripts/test's last
/// stage) and links the sanitizer's runtime. `swift test --sanitize=address` would instrument every dependency too,
/// from scratch (11 minutes of CI's 45 on 2 cores); the code ASan is here to check is ours: the HTTP/2 engine's
/// calls across the C boundary into libnghttp2, zlib and SQLite, which are not instrumented either way.
let sanitizer = Context.environment["BROKER_SANITIZE"].flatMap { $0.isEmpty ? nil : $0 }

let swiftSettings: [SwiftSetting] =
    [.enableUpcomingFeature("ExistentialAny")] + (sanitizer.map { [.unsafeFlags(["-sanitize=\($0)"])] } ?? [])

let sanitizerLinkerSettings: [LinkerSetting] = sanitizer.map { [.unsafeFlags(["-sanitize=\($0)"])] } ?? []

/// Release builds of the executables allocate with jemalloc (Debian `libjemalloc-dev`): pushing through the gateway
/// alone, the broker spent 16% of its CPU in glibc's malloc and free, and with jemalloc it pushed 15-19% more
/// (BENCHMARKS.md, round 12). Debug builds, and with them the tests and the AddressSanitizer stage, keep glibc's.
let executableLinkerSettings: [LinkerSetting] =
    [.linkedLibrary("jemalloc", .when(platforms: [.linux], configuration: .release))] + sanitizerLinkerSettings

let package = Package(
    name: "impulse-broker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "broker", targets: ["Broker"]),
        .executable(name: "broker-bench", targets: ["Bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        // zlib, for compressed REST answers (`Content-Encoding: gzip` / `deflate`).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .target(
            name: "Engine",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, which GRDB links: the hot multi-row statements bind their values directly.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // The shared store of several nodes (issue 21): PostgreSQL through postgres-nio's pool, TLS by NIOSSL.
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Gateway",
            dependencies: [
                "Engine",
                "CNGHTTP2",
                "CZlib",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // HTTPResponsePart, to answer an HTTP/1.1 request the parser refused with a problem body.
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                // RSA (RS256) for FCM's service-account assertions; swift-certificates builds it already.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // The webhook dispatcher's HTTPS client.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // The console's server-rendered pages.
                .product(name: "Mustache", package: "swift-mustache"),
                // The console's media upload (multipart/form-data, read as it arrives).
                .product(name: "MultipartKit", package: "multipart-kit"),
            ],
            // The OpenAPI document of the whole HTTP surface, served at /openapi.json.
            resources: [.copy("REST/openapi.json")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "Broker",
            dependencies: [
                "Engine",
                "Gateway",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // A backup's manifest records the credential key's SHA-256.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            resources: [.copy("Resources/demo-catalog.json")],
            swiftSettings: swiftSettings,
            linkerSettings: executableLinkerSettings
        ),
        .executableTarget(
            name: "Bench",
            dependencies: [
                "Engine",
                "Gateway",
                "Simulation",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings,
            linkerSettings: executableLinkerSettings
        ),
        // Simulated readers with latent reading habits, proving learned delivery times (issue 36) in the tests and
        // in broker-bench's learned-timing scenario.
        .target(
            name: "Simulation",
            dependencies: ["Engine", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TestSupport",
            dependencies: [
                // The shared store test suite's fixture opens both stores.
                "Engine",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EngineTests",
            dependencies: [
                "Engine", "TestSupport", "Simulation", .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings,
            linkerSettings: sanitizerLinkerSettings
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "Engine",
                "Gateway",
                "TestSupport",
                // The hand-made HTTP/2 client of the attack tests decodes answers with libnghttp2's HPACK.
                "CNGHTTP2",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings,
            linkerSettings: sanitizerLinkerSettings
        ),
    ]
)

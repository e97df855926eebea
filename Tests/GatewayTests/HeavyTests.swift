import Testing

/// The heavy tests, one at a time: each starts several broker processes and pushes thousands of users (a cluster, a
/// kill or stop mid-burst, a backup drill, the previous release). Two or three of them at once on CI's two cores
/// starved the rest of the suite past its waits. Nested in this serialized suite they run one after another and,
/// under the run's bound on parallel tests (`scripts/test`), take one place of it, not one each while waiting.
@Suite("Heavy tests, one at a time", .serialized)
enum HeavyTests {}

import Engine
import Foundation
import Simulation
import Testing

/// The yardstick learner that sees every allowed time's outcome each day (``FullInformationReference``), in a world
/// whose answer is known: a reader who opens the app once a day, at 09:10 UTC, and from day 30 at 06:10.
@Suite("The full-information reference learner")
struct FullInformationReferenceTests {
    struct OneHabitWorld: ReaderWorld {
        let family = "one-habit"
        let seed: UInt64 = 0
        /// Monday 2026-01-05, midnight UTC.
        let start = Date(timeIntervalSince1970: 1_767_571_200)
        let tenantQuietHours = QuietHours(
            start: try! LocalTime(hour: 22, minute: 0),
            end: try! LocalTime(hour: 4, minute: 0)
        )
        let tenantWeekdays = Weekdays.all
        let readers = [
            WorldReader(timeZone: "UTC", stated: try! LocalTime(hour: 7, minute: 0), group: "stays"),
            WorldReader(
                timeZone: "UTC",
                stated: try! LocalTime(hour: 7, minute: 0),
                group: "moves-earlier",
                habitMovesOnDay: 30
            ),
        ]

        /// The app's one opening of a day, as seconds after the world's start.
        func opening(reader: Int, day: Int) -> TimeInterval {
            let minute = readers[reader].habitMovesOnDay.map { day >= $0 } == true ? 6 * 60 + 10 : 9 * 60 + 10
            return TimeInterval(day * 86_400 + minute * 60)
        }

        func readTime(reader: Int, pushedAt: Date) -> Date? {
            let seconds = pushedAt.timeIntervalSince(start)
            let day = Int((seconds / 86_400).rounded(.down))
            for next in day...(day + 1) where opening(reader: reader, day: next) >= seconds {
                return start.addingTimeInterval(opening(reader: reader, day: next))
            }
            return nil
        }

        func chanceWithinHour(reader: Int, pushedAt: Date) -> Double {
            guard let read = readTime(reader: reader, pushedAt: pushedAt) else { return 0 }
            return read.timeIntervalSince(pushedAt) <= 3600 ? 1 : 0
        }
    }

    @Test("Finds the habit by day 22; follows a moved one only when the past fades")
    func knownAnswer() throws {
        let results = FullInformationReference(
            days: 60,
            variants: [
                .init(halfLifeDays: nil, smoothingMinutes: 0), .init(halfLifeDays: 7, smoothingMinutes: 30),
            ]
        ).run(OneHabitWorld())
        let (stillness, fading) = (results[0], results[1])
        // The reader who stays: every day from day 22 read within the hour, as at the oracle's time; at the stated
        // 07:00 never.
        for result in results {
            let stays = try #require(result.groups["stays"])
            #expect(stays.pushes == 39)
            #expect(stays.learned == 39 && stays.oracle == 39 && stays.fixed == 0, "\(result.variant): \(stays)")
        }
        // The reader whose habit moved to 06:10 on day 30 (read within the hour from 05:10): the stated 07:00 is
        // late for it too. Without fading, 30 days at 09:10 outweigh what came after until the end; with a half
        // life of 7 days the new habit wins within days.
        #expect(stillness.afterMove.pushes == 16 && stillness.afterMove.oracle == 16)
        #expect(stillness.afterMove.learned == 0, "\(stillness.afterMove)")
        #expect(fading.afterMove.learned == 16, "\(fading.afterMove)")
    }
}

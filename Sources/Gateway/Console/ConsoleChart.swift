import Engine
import Foundation

/// The engagement of a range of days as an SVG bar chart, rendered on the server: a grey bar per day for the
/// deliveries assigned and a blue one inside it for those read. Every text is escaped; colours come from the
/// stylesheet (classes), so the Content-Security-Policy needs no inline style.
enum ConsoleChart {
    static func svg(_ days: [EngagementReport.Day], title: String) -> String {
        let width = 900.0
        let height = 260.0
        let (left, right, top, bottom) = (48.0, 12.0, 16.0, 36.0)
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let maximum = max(1, days.map(\.counts.assigned).max() ?? 1)
        let scale = niceCeiling(maximum)
        let slot = plotWidth / Double(max(days.count, 1))
        let barWidth = max(2, slot * 0.7)
        var parts: [String] = []
        parts.append(
            #"<svg class="chart" viewBox="0 0 \#(Int(width)) \#(Int(height))" role="img" aria-labelledby="chart-title" xmlns="http://www.w3.org/2000/svg">"#
        )
        parts.append(#"<title id="chart-title">\#(escape(title))</title>"#)
        for step in 0...4 {
            let value = Double(scale) * Double(step) / 4
            let y = top + plotHeight - plotHeight * value / Double(scale)
            parts.append(
                #"<line class="axis" x1="\#(fmt(left))" y1="\#(fmt(y))" x2="\#(fmt(width - right))" y2="\#(fmt(y))" stroke-opacity="0.25"/>"#
            )
            let label = value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
            parts.append(#"<text x="\#(fmt(left - 6))" y="\#(fmt(y + 4))" text-anchor="end">\#(label)</text>"#)
        }
        for (index, day) in days.enumerated() {
            let x = left + slot * Double(index) + (slot - barWidth) / 2
            let assigned = plotHeight * Double(day.counts.assigned) / Double(scale)
            let read = plotHeight * Double(min(day.counts.read, day.counts.assigned)) / Double(scale)
            let label = "\(day.day): \(day.counts.assigned) assigned, \(day.counts.read) read"
            parts.append(
                #"<g><title>\#(escape(label))</title><rect class="assigned" x="\#(fmt(x))" y="\#(fmt(top + plotHeight - assigned))" width="\#(fmt(barWidth))" height="\#(fmt(assigned))"/>"#
                    + #"<rect class="read" x="\#(fmt(x + barWidth * 0.2))" y="\#(fmt(top + plotHeight - read))" width="\#(fmt(barWidth * 0.6))" height="\#(fmt(read))"/></g>"#
            )
            if index % 5 == 0 || index == days.count - 1 {
                let text = String(day.day.description.suffix(5))
                parts.append(
                    #"<text x="\#(fmt(x + barWidth / 2))" y="\#(fmt(height - bottom + 16))" text-anchor="middle">\#(escape(text))</text>"#
                )
            }
        }
        parts.append(
            #"<line class="axis" x1="\#(fmt(left))" y1="\#(fmt(top + plotHeight))" x2="\#(fmt(width - right))" y2="\#(fmt(top + plotHeight))"/>"#
        )
        parts.append("</svg>")
        return parts.joined(separator: "\n")
    }

    /// 1, 2 or 5 times a power of ten, at least `value`.
    static func niceCeiling(_ value: Int) -> Int {
        var power = 1
        while power * 10 <= value { power *= 10 }
        for factor in [1, 2, 5, 10] where factor * power >= value { return factor * power }
        return 10 * power
    }

    static func fmt(_ value: Double) -> String { String(format: "%.1f", value) }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }
}

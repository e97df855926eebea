import Foundation

/// SplitMix64 (Steele, Lea and Flood, 2014): a generator whose whole state is one word, so a reader's day is seeded
/// by hashing its keys alone, and every machine draws the same numbers (the system generator does not).
struct SplitMix64 {
    private var state: UInt64

    /// A generator for one combination of keys (a tag, the seed, a reader, a day...).
    init(keys: UInt64...) {
        var state: UInt64 = 0x5851_F42D_4C95_7F2D
        for key in keys { state = Self.mix(state ^ Self.mix(key &+ 0x9E37_79B9_7F4A_7C15)) }
        self.state = state
    }

    /// SplitMix64's finaliser: a bijection that spreads every input bit over the output.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// Uniform in [0, 1), 53 bits.
    mutating func uniform() -> Double { Double(next() >> 11) * 0x1p-53 }

    mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + (range.upperBound - range.lowerBound) * uniform()
    }

    /// Uniform in `0..<count`; `count` is positive.
    mutating func index(_ count: Int) -> Int { min(count - 1, Int(uniform() * Double(count))) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + index(range.count) }

    mutating func chance(_ probability: Double) -> Bool { uniform() < probability }

    mutating func pick<Element>(_ items: [Element]) -> Element { items[index(items.count)] }

    /// A standard normal draw (Box-Muller; `1 - u` keeps the logarithm's argument in (0, 1]).
    mutating func normal() -> Double {
        let radius = (-2 * log(1 - uniform())).squareRoot()
        return radius * cos(2 * Double.pi * uniform())
    }

    /// A Poisson draw by Knuth's product of uniforms; the means here stay below about 40.
    mutating func poisson(_ mean: Double) -> Int {
        guard mean > 0 else { return 0 }
        let limit = exp(-mean)
        var count = 0
        var product = uniform()
        while product > limit, count < 1000 {
            count += 1
            product *= uniform()
        }
        return count
    }

    /// Fisher-Yates.
    mutating func shuffle<Element>(_ items: inout [Element]) {
        guard items.count > 1 else { return }
        for last in stride(from: items.count - 1, to: 0, by: -1) {
            items.swapAt(last, index(last + 1))
        }
    }
}

/// The tags that keep the generator's streams apart: the population's, and the days' luck.
enum LuckTag {
    static let roles: UInt64 = 0x726F_6C65
    static let reader: UInt64 = 0x7265_6164
    static let day: UInt64 = 0x6461_7973
}

import Foundation

/// A deterministic random number generator (SplitMix64): the same seed gives the same numbers on every node and
/// after every restart, so a choice drawn from it for a user and a day is the same wherever it is made again.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform number in the open interval (0, 1).
    public mutating func unit() -> Double {
        (Double(next() >> 11) + 0.5) / Double(1 << 53)
    }

    /// A standard normal number (Box-Muller).
    public mutating func normal() -> Double {
        (-2 * log(unit())).squareRoot() * cos(2 * Double.pi * unit())
    }

    /// A Gamma(shape, 1) number (Marsaglia and Tsang; a shape below 1 is lifted by one and scaled back).
    public mutating func gamma(shape: Double) -> Double {
        if shape < 1 { return gamma(shape: shape + 1) * pow(unit(), 1 / shape) }
        let d = shape - 1.0 / 3
        let c = 1 / (9 * d).squareRoot()
        while true {
            var x: Double
            var v: Double
            repeat {
                x = normal()
                v = 1 + c * x
            } while v <= 0
            v = v * v * v
            let u = unit()
            if u < 1 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1 - v + log(v)) { return d * v }
        }
    }

    /// A Beta(alpha, beta) number.
    public mutating func beta(_ alpha: Double, _ beta: Double) -> Double {
        let x = gamma(shape: alpha)
        let y = gamma(shape: beta)
        return x / (x + y)
    }
}

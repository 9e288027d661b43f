/// A composite index key's components: what the table keeps per entity and index (its
/// ``KeyColumn``, `IndexedRows.columns`), what cursors record and what a tie between two long
/// keys compares.
/// Index entries hold the key's encoding instead (``NormalizedKey``). The first two components
/// are stored inline and only a third and later one go to a heap array.
///
/// The stored properties are declared in this order so that `count` fills the padding after
/// `first` (an `IndexValue` is 17 bytes): 56 bytes a key.
struct IndexKey: Sendable {
    var first: IndexValue
    private let storedCount: UInt8
    /// `.null` when the key has one component.
    var second: IndexValue
    /// The components after the second, if any.
    var more: [IndexValue]?

    /// The number of components.
    var count: Int { Int(storedCount) }

    init(_ first: IndexValue) {
        self.first = first
        self.second = .null
        self.more = nil
        self.storedCount = 1
    }

    init(_ first: IndexValue, _ second: IndexValue) {
        self.first = first
        self.second = second
        self.more = nil
        self.storedCount = 2
    }

    init(_ values: [IndexValue]) {
        precondition(!values.isEmpty && values.count <= Int(UInt8.max), "an index key has 1 to 255 components")
        first = values[0]
        second = values.count > 1 ? values[1] : .null
        more = values.count > 2 ? Array(values[2...]) : nil
        storedCount = UInt8(values.count)
    }

    subscript(i: Int) -> IndexValue {
        switch i {
        case 0: first
        case 1: second
        default: more![i - 2]
        }
    }

    var values: [IndexValue] { (0..<count).map { self[$0] } }

    /// Replaces component `i`.
    mutating func set(_ i: Int, _ value: IndexValue) {
        switch i {
        case 0: first = value
        case 1: second = value
        default: more![i - 2] = value
        }
    }
}

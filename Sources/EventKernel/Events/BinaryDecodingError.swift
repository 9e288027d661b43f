public import KernelPrimitives

/// Why binary input could not be decoded, and where: what event codecs, snapshot readers and
/// the envelope decoder throw for malformed bytes.
///
/// Defined beside the reader in the package's primitives module (everything else there is
/// package access) and named here so that apps catch it as `EventKernel.BinaryDecodingError`.
public typealias BinaryDecodingError = KernelPrimitives.BinaryDecodingError

#ifndef EVENTKERNEL_CCRC32C_H
#define EVENTKERNEL_CCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Whether this processor has a CRC-32C instruction this build can use (SSE 4.2 on x86-64,
/// the CRC32 extension on AArch64): decided once, at the first call.
int eventkernel_crc32c_hardware_available(void);

/// Continues the CRC-32C register `crc` (already inverted: the caller inverts before and after)
/// over `count` bytes at `bytes` with the processor's instruction. Call only when
/// `eventkernel_crc32c_hardware_available()` returned non-zero.
uint32_t eventkernel_crc32c_hardware_update(uint32_t crc, const void *bytes, size_t count);

// The CRC-32C of A followed by B from crc(A), crc(B) and B's length in bytes (no processor
// instruction needed: on every platform).
uint32_t eventkernel_crc32c_combine(uint32_t first, uint32_t second, size_t count);

#endif

// CRC-32C with the processor's instruction. In C because Swift cannot reach the instruction:
// it has no intrinsics for it, and a function compiled for a target feature (SSE 4.2, the
// AArch64 CRC extension) must be chosen at run time on processors that may lack it.
//
// Also the combination of two checksums (eventkernel_crc32c_combine), whose multiplication
// modulo P the streams' shift tables are built with: one implementation of it.
//
// Three independent streams over thirds of each large block hide the instruction's latency
// (3 cycles, one issued per cycle on x86-64): one stream runs at a third of the instruction's
// throughput. The three results are combined by multiplying the earlier ones by x^(8·n) mod P
// (the polynomial shift of zlib's crc32_combine), with four 256-entry tables of that product,
// one per byte of the register, built once.

#include "CCRC32C.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define EK_HW_ATTR __attribute__((target("sse4.2")))
static inline EK_HW_ATTR uint32_t ek_crc_u8(uint32_t crc, uint8_t v) { return _mm_crc32_u8(crc, v); }
static inline EK_HW_ATTR uint32_t ek_crc_u64(uint32_t crc, uint64_t v) { return (uint32_t)_mm_crc32_u64(crc, v); }
#define EK_HAVE_HW 1
#elif defined(__aarch64__)
#include <arm_acle.h>
#define EK_HW_ATTR __attribute__((target("crc")))
static inline EK_HW_ATTR uint32_t ek_crc_u8(uint32_t crc, uint8_t v) { return __crc32cb(crc, v); }
static inline EK_HW_ATTR uint32_t ek_crc_u64(uint32_t crc, uint64_t v) { return __crc32cd(crc, v); }
#define EK_HAVE_HW 1
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif
#else
#define EK_HAVE_HW 0
#endif

// Multiplies a (reflected) by b (reflected) modulo P (reflected 0x82F63B78).
static uint32_t ek_multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (int i = 0; i < 32; i++) {
        if (a & 0x80000000u) product ^= b;
        a <<= 1;
        b = (b & 1) ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return product;
}

// x^(8·2^k) mod P for k = 0..<64 (reflected), for eventkernel_crc32c_combine: built once.
static uint32_t ek_powers[64];
static pthread_once_t ek_powers_once = PTHREAD_ONCE_INIT;

static void ek_build_powers(void) {
    ek_powers[0] = 0x00800000u; // x^8, reflected
    for (int k = 1; k < 64; k++) ek_powers[k] = ek_multiply(ek_powers[k - 1], ek_powers[k - 1]);
}

uint32_t eventkernel_crc32c_combine(uint32_t first, uint32_t second, size_t count) {
    // crc(A‖B) = crc(A) · x^(8·|B|) mod P  XOR  crc(B) (zlib's crc32_combine; the initial and
    // final inversions cancel). x^(8·|B|) is the product of the powers of the bits of |B|.
    pthread_once(&ek_powers_once, ek_build_powers);
    uint32_t power = 0x80000000u; // x^0, reflected
    for (int k = 0; count != 0; k++, count >>= 1) {
        if (count & 1) power = ek_multiply(power, ek_powers[k]);
    }
    return ek_multiply(first, power) ^ second;
}

#if EK_HAVE_HW

static int ek_known = -1;

static int ek_detect(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
#elif defined(__aarch64__) && defined(__APPLE__)
    return 1; // Every Apple AArch64 processor has the CRC32 extension.
#elif defined(__aarch64__) && defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) ? 1 : 0;
#else
    return 0;
#endif
}

int eventkernel_crc32c_hardware_available(void) {
    // Every thread computes the same answer; the atomics keep the sanitizers' race checks quiet.
    int value = __atomic_load_n(&ek_known, __ATOMIC_RELAXED);
    if (value < 0) {
        value = ek_detect();
        __atomic_store_n(&ek_known, value, __ATOMIC_RELAXED);
    }
    return value;
}

// Streams have one fixed length, so the shift is one multiplication by the constant
// x^(8·EK_STREAM) mod P, applied with four 256-entry tables (one per byte of the register),
// built once.

enum { EK_STREAM = 4096, EK_BLOCK = 3 * EK_STREAM };

// The 4 tables (one per byte of a register) of "multiply by x^(8·EK_STREAM) mod P".
static uint32_t ek_shift_table[4][256];
static pthread_once_t ek_shift_once = PTHREAD_ONCE_INIT;

static void ek_build_shift(void) {
    // x^(8·EK_STREAM) mod P, reflected: start from x^0 (0x80000000 reflected) and multiply by
    // x^8 (0x00800000 reflected) EK_STREAM times.
    uint32_t power = 0x80000000u;
    for (int i = 0; i < EK_STREAM; i++) power = ek_multiply(power, 0x00800000u);
    for (int byte = 0; byte < 4; byte++) {
        for (uint32_t v = 0; v < 256; v++) {
            ek_shift_table[byte][v] = ek_multiply(v << (8 * byte), power);
        }
    }
}

static inline uint32_t ek_shift(uint32_t crc) {
    return ek_shift_table[0][crc & 0xFF] ^ ek_shift_table[1][(crc >> 8) & 0xFF]
         ^ ek_shift_table[2][(crc >> 16) & 0xFF] ^ ek_shift_table[3][crc >> 24];
}

static EK_HW_ATTR uint32_t ek_serial(uint32_t crc, const unsigned char *p, size_t n) {
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = ek_crc_u64(crc, word);
        p += 8;
        n -= 8;
    }
    while (n > 0) {
        crc = ek_crc_u8(crc, *p++);
        n--;
    }
    return crc;
}

EK_HW_ATTR uint32_t eventkernel_crc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *p = (const unsigned char *)bytes;
    if (count >= EK_BLOCK) {
        pthread_once(&ek_shift_once, ek_build_shift);
        while (count >= EK_BLOCK) {
            uint32_t a = crc, b = 0, c = 0;
            const unsigned char *pa = p, *pb = p + EK_STREAM, *pc = p + 2 * EK_STREAM;
            for (size_t i = 0; i < EK_STREAM; i += 8) {
                uint64_t wa, wb, wc;
                memcpy(&wa, pa + i, 8);
                memcpy(&wb, pb + i, 8);
                memcpy(&wc, pc + i, 8);
                a = ek_crc_u64(a, wa);
                b = ek_crc_u64(b, wb);
                c = ek_crc_u64(c, wc);
            }
            // crc(A‖B‖C) = shift(shift(a) ^ b) ^ c, with b and c started from zero.
            crc = ek_shift(ek_shift(a) ^ b) ^ c;
            p += EK_BLOCK;
            count -= EK_BLOCK;
        }
    }
    return ek_serial(crc, p, count);
}

#else

int eventkernel_crc32c_hardware_available(void) { return 0; }
uint32_t eventkernel_crc32c_hardware_update(uint32_t crc, const void *bytes, size_t count) {
    (void)bytes; (void)count;
    return crc;
}

#endif

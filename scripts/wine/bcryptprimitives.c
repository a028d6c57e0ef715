/* ProcessPrng for Wine 8, which lacks bcryptprimitives.dll: Rust's standard library
 * (1.78 on) takes its randomness from ProcessPrng there, so a Windows test binary does
 * not start under Debian 12's Wine without it. It asks Wine's RtlGenRandom
 * (SystemFunction036, advapi32) for the bytes. Built by scripts/cross-check.sh with
 * mingw-w64 into the Wine prefix the tests run in; never part of soku itself. */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG part = length > 0x7fffffff ? 0x7fffffff : (ULONG)length;
        if (!SystemFunction036(data, part)) return FALSE;
        data += part;
        length -= part;
    }
    return TRUE;
}

// cpu_features: whether this CPU has the instructions that make AES-GCM fast and constant-time
// (x86: AES-NI and PCLMULQDQ; arm64: AES and PMULL). Where it has none, software AES is slow and
// leaks timing, so sealing uses ChaCha20-Poly1305 instead (module_seal.cpp).
//
// No OpenSSL here: CPUID on x86, getauxval(AT_HWCAP) on arm64, false on anything else.
// Thread: any; the answer is computed once.
#pragma once

namespace percore::crypto {

bool cpu_has_aes_instructions();

}  // namespace percore::crypto

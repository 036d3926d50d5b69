// A stand-in crypto module that claims ABI version 2, so the loader test can see it refused.
#include "crypto/module_abi.h"

namespace {
percore_crypto_v1 table{};
}

extern "C" __attribute__((visibility("default"))) const percore_crypto_v1* percore_crypto_v1_get(void) {
    table.abi_version = 2;
    table.struct_size = sizeof table;
    return &table;
}

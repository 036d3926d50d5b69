// Digests: SHA-256 and HMAC-SHA256, one shot (module_abi.h, "Digests").
//
// The SHA-256 digest and the HMAC MAC are fetched once per process and shared (OpenSSL allows
// that, and the module is never unloaded); each call makes its own short-lived context (OpenSSL 3.0
// allocates one per operation whatever the interface), so any number of threads may call at once.
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cstdint>
#include <cstring>

#include "crypto/module_internal.hpp"

namespace percore::crypto::module {

namespace {

const EVP_MD* sha256_md() {
    static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);  // kept for the process's life
    return md;
}

EVP_MAC* hmac_mac() {
    static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);  // kept for the process's life
    return mac;
}

// A failed call leaves nothing in this thread's OpenSSL error queue, and no partial digest.
int failed(std::uint8_t out[PERCORE_SHA256_BYTES]) {
    ERR_clear_error();
    if (out != nullptr) std::memset(out, 0, PERCORE_SHA256_BYTES);
    return -1;
}

}  // namespace

int digest_sha256(const void* data, std::size_t len, std::uint8_t out[PERCORE_SHA256_BYTES]) {
    if (out == nullptr || (data == nullptr && len > 0)) return failed(out);
    const EVP_MD* md = sha256_md();
    if (md == nullptr) return failed(out);
    static const unsigned char nothing = 0;  // EVP wants a pointer even for no bytes
    unsigned int n = 0;
    if (EVP_Digest(len > 0 ? data : &nothing, len, out, &n, md, nullptr) != 1 || n != PERCORE_SHA256_BYTES)
        return failed(out);
    return 0;
}

int hmac_sha256_parts(const void* key, std::size_t key_len, const struct iovec* parts, std::size_t n,
                      std::uint8_t out[PERCORE_SHA256_BYTES]) {
    if (out == nullptr || (key == nullptr && key_len > 0) || (parts == nullptr && n > 0)) return failed(out);
    for (std::size_t i = 0; i < n; ++i)
        if (parts[i].iov_base == nullptr && parts[i].iov_len > 0) return failed(out);
    EVP_MAC* mac = hmac_mac();
    if (mac == nullptr) return failed(out);
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
    if (ctx == nullptr) return failed(out);
    // An empty key is a valid HMAC key, but EVP_MAC_init takes a null key as "keep the old one"
    // (and there is none): hand it a pointer to nothing.
    static const unsigned char nothing = 0;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
        OSSL_PARAM_construct_end(),
    };
    bool ok = EVP_MAC_init(ctx, static_cast<const unsigned char*>(key_len > 0 ? key : &nothing), key_len, params) == 1;
    for (std::size_t i = 0; ok && i < n; ++i)
        if (parts[i].iov_len > 0)
            ok = EVP_MAC_update(ctx, static_cast<const unsigned char*>(parts[i].iov_base), parts[i].iov_len) == 1;
    std::size_t written = 0;
    ok = ok && EVP_MAC_final(ctx, out, &written, PERCORE_SHA256_BYTES) == 1 && written == PERCORE_SHA256_BYTES;
    EVP_MAC_CTX_free(ctx);  // wipes the key schedule it held
    return ok ? 0 : failed(out);
}

int hmac_sha256(const void* key, std::size_t key_len, const void* data, std::size_t len,
                std::uint8_t out[PERCORE_SHA256_BYTES]) {
    if (data == nullptr && len > 0) return failed(out);
    const struct iovec part = {const_cast<void*>(data), len};
    return hmac_sha256_parts(key, key_len, &part, 1, out);
}

}  // namespace percore::crypto::module

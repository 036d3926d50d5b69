// Sealing: AES-256-GCM or ChaCha20-Poly1305 over the sealed form drawn in module_abi.h.
//
// The EVP ciphers are fetched once per process and shared (OpenSSL allows that); every seal and
// open makes its own short-lived EVP_CIPHER_CTX, so a key may be used by many threads at once.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>

#include "crypto/cpu_features.hpp"
#include "crypto/module_internal.hpp"

struct percore_seal_key {
    int suite = PERCORE_SEAL_CHACHA20_POLY1305;                      // the suite seal() uses
    unsigned char subkeys[2][PERCORE_SEAL_KEY_BYTES] = {};           // [suite - 1], from HKDF
};

namespace percore::crypto::module {

namespace {

constexpr std::size_t max_key_file_bytes = 4096;           // a key file is 64 digits and some space
constexpr std::size_t key_hex_digits = 2 * PERCORE_SEAL_KEY_BYTES;
constexpr std::size_t max_update_bytes = std::size_t{1} << 30;  // EVP lengths are int
constexpr const char* suite_variable = "PERCORE_SEAL_SUITE";

struct suite_entry {
    int id;
    const char* name;      // as PERCORE_SEAL_SUITE and seal_suite_name() spell it
    const char* hkdf_info;
};

constexpr suite_entry suites[] = {
    {PERCORE_SEAL_AES_256_GCM, "aes-256-gcm", "percore-seal-v1 aes-256-gcm"},
    {PERCORE_SEAL_CHACHA20_POLY1305, "chacha20-poly1305", "percore-seal-v1 chacha20-poly1305"},
};

bool known_suite(int suite) { return suite == PERCORE_SEAL_AES_256_GCM || suite == PERCORE_SEAL_CHACHA20_POLY1305; }

const EVP_CIPHER* cipher_for(int suite) {
    struct fetched {
        EVP_CIPHER* aes = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
        EVP_CIPHER* chacha = EVP_CIPHER_fetch(nullptr, "ChaCha20-Poly1305", nullptr);
    };
    static const fetched ciphers;  // kept for the life of the process (the module is never unloaded)
    if (suite == PERCORE_SEAL_AES_256_GCM) return ciphers.aes;
    if (suite == PERCORE_SEAL_CHACHA20_POLY1305) return ciphers.chacha;
    return nullptr;
}

bool hkdf_sha256(const unsigned char* ikm, std::size_t ikm_len, const char* info, unsigned char* out,
                 std::size_t out_len) {
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    if (kdf == nullptr) return false;
    EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
    EVP_KDF_free(kdf);
    if (ctx == nullptr) return false;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<unsigned char*>(ikm), ikm_len),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info), std::strlen(info)),
        OSSL_PARAM_construct_end(),
    };
    bool ok = EVP_KDF_derive(ctx, out, out_len, params) == 1;
    EVP_KDF_CTX_free(ctx);
    return ok;
}

int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Reads the whole file (at most max_key_file_bytes) into `buf`; false and a reason otherwise.
bool read_key_file(const char* path, unsigned char* buf, std::size_t& size, char* err, std::size_t err_len) {
    int fd;
    do fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        set_error(err, err_len, "cannot read seal key file %s: %s", path, std::strerror(errno));
        return false;
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        set_error(err, err_len, "seal key file %s is not a regular file", path);
        ::close(fd);
        return false;
    }
    size = 0;
    while (size <= max_key_file_bytes) {
        ssize_t n = ::read(fd, buf + size, max_key_file_bytes + 1 - size);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            set_error(err, err_len, "cannot read seal key file %s: %s", path, std::strerror(errno));
            ::close(fd);
            return false;
        }
        if (n == 0) break;
        size += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (size > max_key_file_bytes) {
        set_error(err, err_len, "seal key file %s is larger than %zu bytes; it must hold 64 hex digits", path,
                  max_key_file_bytes);
        return false;
    }
    return true;
}

bool parse_key(const char* path, const unsigned char* text, std::size_t size, unsigned char* key, char* err,
               std::size_t err_len) {
    std::size_t begin = 0, end = size;
    while (begin < end && is_space(text[begin])) ++begin;
    while (end > begin && is_space(text[end - 1])) --end;
    for (std::size_t i = begin; i < end; ++i) {
        if (hex_value(text[i]) >= 0) continue;
        unsigned char c = text[i];
        if (c >= 0x21 && c <= 0x7e)
            set_error(err, err_len, "seal key file %s: '%c' at byte %zu is not a hex digit", path, c, i);
        else
            set_error(err, err_len, "seal key file %s: byte 0x%02x at byte %zu is not a hex digit", path, c, i);
        return false;
    }
    if (end - begin != key_hex_digits) {
        set_error(err, err_len, "seal key file %s holds %zu hex digits; it must hold exactly %zu (a 32-byte key)",
                  path, end - begin, key_hex_digits);
        return false;
    }
    for (std::size_t i = 0; i < PERCORE_SEAL_KEY_BYTES; ++i)
        key[i] = static_cast<unsigned char>(hex_value(text[begin + 2 * i]) << 4 | hex_value(text[begin + 2 * i + 1]));
    return true;
}

bool choose_suite(int& suite, char* err, std::size_t err_len) {
    const char* forced = std::getenv(suite_variable);
    if (forced == nullptr || *forced == '\0') {
        suite = percore::crypto::cpu_has_aes_instructions() ? PERCORE_SEAL_AES_256_GCM : PERCORE_SEAL_CHACHA20_POLY1305;
        return true;
    }
    for (const suite_entry& entry : suites) {
        if (std::strcmp(forced, entry.name) == 0) {
            suite = entry.id;
            return true;
        }
    }
    set_error(err, err_len, "%s=%s: expected aes-256-gcm or chacha20-poly1305", suite_variable, forced);
    return false;
}

}  // namespace

int aead(bool encrypt, int suite, const unsigned char* key, const unsigned char* nonce,
         std::initializer_list<byte_range> aad, const unsigned char* in, std::size_t len, unsigned char* out,
         unsigned char* tag) {
    const EVP_CIPHER* cipher = cipher_for(suite);
    if (cipher == nullptr) return known_suite(suite) ? PERCORE_SEAL_INTERNAL : PERCORE_SEAL_UNKNOWN_SUITE;
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    if (ctx == nullptr) return PERCORE_SEAL_INTERNAL;
    bool ok = EVP_CipherInit_ex2(ctx, cipher, key, nonce, encrypt ? 1 : 0, nullptr) == 1;
    int written = 0;
    for (const byte_range& part : aad) {
        for (std::size_t done = 0; ok && done < part.size;) {
            std::size_t step = std::min(part.size - done, max_update_bytes);
            ok = EVP_CipherUpdate(ctx, nullptr, &written, part.data + done, static_cast<int>(step)) == 1;
            done += step;
        }
    }
    for (std::size_t done = 0; ok && done < len;) {
        std::size_t step = std::min(len - done, max_update_bytes);
        ok = EVP_CipherUpdate(ctx, out + done, &written, in + done, static_cast<int>(step)) == 1 &&
             static_cast<std::size_t>(written) == step;
        done += step;
    }
    if (ok && !encrypt)
        ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, PERCORE_SEAL_TAG_BYTES, tag) == 1;
    unsigned char final_block[32];
    bool final_ok = ok && EVP_CipherFinal_ex(ctx, final_block, &written) == 1 && written == 0;
    if (final_ok && encrypt)
        final_ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, PERCORE_SEAL_TAG_BYTES, tag) == 1;
    EVP_CIPHER_CTX_free(ctx);
    ERR_clear_error();
    if (!ok) return PERCORE_SEAL_INTERNAL;
    if (!final_ok) {
        if (len > 0) OPENSSL_cleanse(out, len);  // never leave unauthenticated plaintext behind
        return encrypt ? PERCORE_SEAL_INTERNAL : PERCORE_SEAL_AUTH_FAILED;
    }
    return PERCORE_SEAL_OK;
}

int seal_with(const percore_seal_key* key, const std::uint8_t* nonce, const void* aad, std::size_t aad_len,
              const void* plain, std::size_t len, void* out, std::size_t out_cap, std::size_t* out_len) {
    if (key == nullptr || out_len == nullptr) return PERCORE_SEAL_INTERNAL;
    if (len > SIZE_MAX - PERCORE_SEAL_OVERHEAD) {
        *out_len = 0;
        return PERCORE_SEAL_OUTPUT_TOO_SMALL;
    }
    const std::size_t need = len + PERCORE_SEAL_OVERHEAD;
    *out_len = need;
    if (out == nullptr || out_cap < need) return PERCORE_SEAL_OUTPUT_TOO_SMALL;
    auto* o = static_cast<unsigned char*>(out);
    o[0] = PERCORE_SEAL_FORMAT_V1;
    o[1] = static_cast<unsigned char>(key->suite);
    if (nonce != nullptr) {
        std::memcpy(o + 2, nonce, PERCORE_SEAL_NONCE_BYTES);
    } else if (RAND_bytes(o + 2, PERCORE_SEAL_NONCE_BYTES) != 1) {
        ERR_clear_error();
        *out_len = 0;
        return PERCORE_SEAL_INTERNAL;
    }
    int status = aead(true, key->suite, key->subkeys[key->suite - 1], o + 2,
                      {{o, PERCORE_SEAL_HEADER_BYTES}, {static_cast<const unsigned char*>(aad), aad_len}},
                      static_cast<const unsigned char*>(plain), len, o + PERCORE_SEAL_HEADER_BYTES,
                      o + PERCORE_SEAL_HEADER_BYTES + len);
    if (status != PERCORE_SEAL_OK) {
        OPENSSL_cleanse(o, need);
        *out_len = 0;
    }
    return status;
}

namespace {

// A key of `suite` with both suites' subkeys derived from `master` (which the caller wipes).
percore_seal_key* key_from_master(const unsigned char* master, int suite, char* err, std::size_t err_len) {
    auto* key = new (std::nothrow) percore_seal_key;
    if (key == nullptr) {
        set_error(err, err_len, "out of memory");
        return nullptr;
    }
    key->suite = suite;
    for (const suite_entry& entry : suites) {
        if (!hkdf_sha256(master, PERCORE_SEAL_KEY_BYTES, entry.hkdf_info, key->subkeys[entry.id - 1],
                         PERCORE_SEAL_KEY_BYTES)) {
            set_error(err, err_len, "cannot derive the seal keys: %s", take_openssl_reason());
            seal_key_free(key);
            return nullptr;
        }
    }
    if (cipher_for(suite) == nullptr) {
        set_error(err, err_len, "OpenSSL offers no %s here: %s", suites[suite - 1].name, take_openssl_reason());
        seal_key_free(key);
        return nullptr;
    }
    return key;
}

}  // namespace

percore_seal_key* seal_key_load(const char* path, char* err, std::size_t err_len) {
    if (path == nullptr) {
        set_error(err, err_len, "no seal key file given");
        return nullptr;
    }
    int suite = 0;
    if (!choose_suite(suite, err, err_len)) return nullptr;
    unsigned char text[max_key_file_bytes + 1];
    std::size_t size = 0;
    unsigned char master[PERCORE_SEAL_KEY_BYTES];
    bool ok = read_key_file(path, text, size, err, err_len) && parse_key(path, text, size, master, err, err_len);
    OPENSSL_cleanse(text, sizeof text);
    percore_seal_key* key = ok ? key_from_master(master, suite, err, err_len) : nullptr;
    OPENSSL_cleanse(master, sizeof master);
    return key;
}

percore_seal_key* seal_key_from_bytes(const std::uint8_t key[PERCORE_SEAL_KEY_BYTES], char* err, std::size_t err_len) {
    if (key == nullptr) {
        set_error(err, err_len, "no seal key given");
        return nullptr;
    }
    int suite = 0;
    if (!choose_suite(suite, err, err_len)) return nullptr;
    return key_from_master(key, suite, err, err_len);
}

void seal_key_free(percore_seal_key* key) {
    if (key == nullptr) return;
    OPENSSL_cleanse(key->subkeys, sizeof key->subkeys);
    delete key;
}

const char* seal_suite_name(const percore_seal_key* key) {
    if (key == nullptr || !known_suite(key->suite)) return "";
    return suites[key->suite - 1].name;
}

int seal(const percore_seal_key* key, const void* aad, std::size_t aad_len, const void* plain, std::size_t len,
         void* out, std::size_t out_cap, std::size_t* out_len) {
    return seal_with(key, nullptr, aad, aad_len, plain, len, out, out_cap, out_len);
}

int open(const percore_seal_key* key, const void* aad, std::size_t aad_len, const void* sealed, std::size_t len,
         void* out, std::size_t out_cap, std::size_t* out_len) {
    if (key == nullptr || out_len == nullptr) return PERCORE_SEAL_INTERNAL;
    *out_len = 0;
    const auto* in = static_cast<const unsigned char*>(sealed);
    if (len == 0) return PERCORE_SEAL_TRUNCATED;
    if (in[0] != PERCORE_SEAL_FORMAT_V1) return PERCORE_SEAL_NOT_SEALED;
    if (len < PERCORE_SEAL_OVERHEAD) return PERCORE_SEAL_TRUNCATED;
    const int suite = in[1];
    if (!known_suite(suite)) return PERCORE_SEAL_UNKNOWN_SUITE;
    const std::size_t plain_len = len - PERCORE_SEAL_OVERHEAD;
    *out_len = plain_len;
    if (out_cap < plain_len || (plain_len > 0 && out == nullptr)) return PERCORE_SEAL_OUTPUT_TOO_SMALL;
    unsigned char tag[PERCORE_SEAL_TAG_BYTES];
    std::memcpy(tag, in + PERCORE_SEAL_HEADER_BYTES + plain_len, sizeof tag);
    int status = aead(false, suite, key->subkeys[suite - 1], in + 2,
                      {{in, PERCORE_SEAL_HEADER_BYTES}, {static_cast<const unsigned char*>(aad), aad_len}},
                      in + PERCORE_SEAL_HEADER_BYTES, plain_len, static_cast<unsigned char*>(out), tag);
    if (status != PERCORE_SEAL_OK) *out_len = 0;
    return status;
}

}  // namespace percore::crypto::module

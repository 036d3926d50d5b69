// module_tls_state: what a TLS server and connection hold inside the crypto module, and the policy
// pieces both sides use, shared by module_tls.cpp, module_tls_client.cpp and the test build's extra
// entries (tests/crypto/test_entries.cpp). Only module
// sources include this (it includes OpenSSL); the server sees module_abi.h alone.
//
// Ownership: a percore_tls_server owns its SSL_CTX (one reference) and its ticket keys; a
// percore_tls_conn owns its SSL and the retry copy. Thread: ticket_keys locks itself; the server's
// context pointer is read under context_mutex (shared) and swapped under it (exclusive).
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "crypto/module_internal.hpp"

namespace percore::crypto::module {

inline constexpr std::int64_t ticket_key_seconds = PERCORE_TLS_TICKET_KEY_SECONDS;

// ALPN's wire form of the one protocol percore speaks: the server chooses it, the client offers it.
inline constexpr unsigned char alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// What server and client contexts share (module_abi.h): TLS 1.2 and 1.3, the suites and groups, the
// security level, no renegotiation or compression, an end of stream without close_notify read as
// CLOSED, buffers released while idle, read-ahead. False when OpenSSL refused a setting.
bool apply_shared_policy(SSL_CTX* ctx);

// Whether `path` names a regular file this process can open; if not, a reason naming `what`
// ("certificate", "key", "CA file") and the path goes into err.
bool check_readable(const char* what, const char* path, char* err, std::size_t err_len);

// Seconds of CLOCK_BOOTTIME (suspended time counts: a ticket key ages while asleep too).
std::int64_t now_seconds();

struct ticket_key {
    unsigned char name[16] = {};
    unsigned char aes[32] = {};   // AES-256-CBC, as OpenSSL's ticket format wants
    unsigned char hmac[32] = {};  // HMAC-SHA256
    std::int64_t created = 0;
    bool valid = false;
};

// A fresh random key created at `now`; false (and `key` untouched) when there are no random bytes.
bool make_ticket_key(ticket_key& key, std::int64_t now);

// The current key encrypts new tickets; the previous one still decrypts (and OpenSSL then issues a
// ticket under the current key). A key encrypts for one period and decrypts for another after it.
class ticket_keys {
public:
    ticket_keys() = default;
    ticket_keys(const ticket_keys&) = delete;
    ticket_keys& operator=(const ticket_keys&) = delete;
    ~ticket_keys() {
        OPENSSL_cleanse(&current_, sizeof current_);
        OPENSSL_cleanse(&previous_, sizeof previous_);
    }

    bool init() { return make_ticket_key(current_, now_seconds()); }

    bool for_encryption(ticket_key& out) {
        std::lock_guard lock(mutex_);
        advance(now_seconds());
        out = current_;
        return out.valid;
    }

    // 1: the current key, 2: the previous one (renew the ticket), 0: unknown or expired.
    int for_decryption(const unsigned char* name, ticket_key& out) {
        std::lock_guard lock(mutex_);
        advance(now_seconds());
        if (current_.valid && std::memcmp(name, current_.name, sizeof current_.name) == 0) {
            out = current_;
            return 1;
        }
        if (previous_.valid && std::memcmp(name, previous_.name, sizeof previous_.name) == 0) {
            out = previous_;
            return 2;
        }
        return 0;
    }

    void rotate_now() {
        std::lock_guard lock(mutex_);
        rotate(now_seconds());
    }

private:
    void advance(std::int64_t now) {
        if (now - current_.created < ticket_key_seconds) return;
        if (now - current_.created >= 2 * ticket_key_seconds) previous_.valid = false;  // too old to decrypt too
        else previous_ = current_;
        ticket_key fresh;
        if (make_ticket_key(fresh, now)) current_ = fresh;  // on failure the current key serves on
        OPENSSL_cleanse(&fresh, sizeof fresh);
        if (previous_.valid && previous_.created == current_.created) previous_.valid = false;
    }

    void rotate(std::int64_t now) {
        ticket_key fresh;
        if (!make_ticket_key(fresh, now)) return;
        previous_ = current_;
        current_ = fresh;
        OPENSSL_cleanse(&fresh, sizeof fresh);
    }

    std::mutex mutex_;
    ticket_key current_;
    ticket_key previous_;
};

}  // namespace percore::crypto::module

struct percore_tls_server {
    std::shared_mutex context_mutex;  // shared: making a connection; exclusive: swapping the context
    SSL_CTX* context = nullptr;       // guarded by context_mutex
    percore::crypto::module::ticket_keys tickets;
};

struct percore_tls_conn {
    SSL* ssl = nullptr;
    const char* last_error = "";     // static text, or `detail`
    char* detail = nullptr;          // a composed reason (a failed verification), malloc'd
    unsigned char* retry = nullptr;  // a record's plaintext that OpenSSL must be given again
    std::size_t retry_len = 0;
    bool failed = false;             // after ERROR no OpenSSL call but SSL_free is allowed
};


#!/bin/sh
# The server binary must not link OpenSSL (it is reached only through the crypto module, loaded on
# first use); the module must, and must export nothing but its table getter, and hold no test-only
# code (that lives in tests/crypto/percore-crypto-test.so, built from the same objects).
# Usage: check_linkage.sh SERVER_BINARY [CRYPTO_MODULE]
set -u
server=$1
module=${2:-}
status=0

needed() {  # the shared libraries a binary needs, directly or not (ldd), or directly (readelf, for
            # binaries of another architecture, which ldd cannot run)
    if ldd "$1" >/dev/null 2>&1; then ldd "$1"; else readelf -d "$1" | grep NEEDED; fi
}

if needed "$server" | grep -E 'libssl|libcrypto'; then
    echo "FAIL: $server links OpenSSL (above); it must load it only through the crypto module"
    status=1
else
    echo "ok: $server links no libssl/libcrypto"
fi

if [ -n "$module" ]; then
    if needed "$module" | grep -q 'libssl' && needed "$module" | grep -q 'libcrypto'; then
        echo "ok: $module links libssl and libcrypto"
    else
        echo "FAIL: $module does not link libssl and libcrypto"
        status=1
    fi
    exported=$(nm -D --defined-only "$module" | awk '$2 ~ /^[TDBRVWu]$/ {print $3}' | sort -u)
    if [ "$exported" = "percore_crypto_v1_get" ]; then
        echo "ok: $module exports only percore_crypto_v1_get"
    else
        echo "FAIL: $module exports more than percore_crypto_v1_get:"
        echo "$exported"
        status=1
    fi
    # The test-only entries (tests/crypto/test_entries.cpp) must be neither exported nor contained:
    # no symbol of theirs (the module is not stripped in a build tree; when it is, only the
    # string check below applies) and no name of the test table's getter anywhere in the file.
    test_only='options_client_new|tls_conn_session|rotate_ticket_keys|rotate_now|aead_seal|aead_open|seal_with_nonce|raw_aead|percore_crypto_test'
    if nm -C "$module" 2>/dev/null | grep -E "$test_only"; then
        echo "FAIL: $module holds test-only code (above); it belongs in percore-crypto-test.so"
        status=1
    elif grep -q percore_crypto_test "$module"; then
        echo "FAIL: $module names percore_crypto_test; test entries belong in percore-crypto-test.so"
        status=1
    else
        echo "ok: $module holds no test-only entries"
    fi
    # Direct needs only: a sanitizer runtime (libubsan) brings libstdc++.so in by itself.
    if readelf -d "$module" | grep NEEDED | grep -q 'libstdc++'; then
        echo "FAIL: $module needs libstdc++.so (it links it statically, as the server does)"
        status=1
    else
        echo "ok: $module links libstdc++ statically"
    fi
fi
exit $status

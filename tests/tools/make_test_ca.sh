#!/usr/bin/env bash
# make_test_ca.sh: a throwaway certificate authority and two server certificates it signed, for the
# HTTPS receiver tests (a delivery to https://... verified against ca_file, SPEC §9).
#
# usage: bash tests/tools/make_test_ca.sh FOLDER
#
# Writes into FOLDER (created if missing; existing files are replaced), all PEM, keys EC P-256:
#   ca.pem, ca.key          the CA (CA:TRUE, keyCertSign), valid 30 days
#   server.pem, server.key  subjectAltName DNS:localhost, IP:127.0.0.1 (serverAuth)
#   wrong.pem, wrong.key    subjectAltName DNS:wrong.example only: a client that connects to
#                           localhost or 127.0.0.1 must refuse it although the CA signed it
# Certificates carry subject and authority key identifiers, which strict verifiers (Python 3.13's
# default VERIFY_X509_STRICT) require. Needs the openssl command (bash .ci/deps installs it).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bash $0 FOLDER" >&2; exit 2; }
out=$1
mkdir -p "$out"
cd "$out"
days=30

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; chmod 600 "$1"; }

key ca.key
cat > ca.cnf <<EOF
[req]
distinguished_name = dn
x509_extensions = v3_ca
prompt = no
[dn]
CN = percore test CA $(date +%s)-$$
[v3_ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EOF
openssl req -new -x509 -config ca.cnf -key ca.key -days "$days" -out ca.pem

leaf() {  # name, subject CN, subjectAltName
    local name=$1 cn=$2 san=$3
    key "$name.key"
    openssl req -new -key "$name.key" -subj "/CN=$cn" -out "$name.csr"
    cat > "$name.ext" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EOF
    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
        -extfile "$name.ext" -out "$name.pem" 2>/dev/null
    rm -f "$name.csr" "$name.ext"
}

leaf server localhost "DNS:localhost, IP:127.0.0.1"
leaf wrong wrong.example "DNS:wrong.example"
rm -f ca.cnf ca.srl
openssl verify -CAfile ca.pem server.pem wrong.pem >/dev/null

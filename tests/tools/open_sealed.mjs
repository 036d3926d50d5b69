#!/usr/bin/env node
// open_sealed.mjs: opens percore's sealed form (a sealed delivery body, application/vnd.percore.sealed,
// SPEC §9) with Node's own crypto, following crypto/module_abi.h ("Sealing") byte for byte, so the
// tests check percore's sealing against an implementation that shares none of its code.
//
// usage: node tests/tools/open_sealed.mjs (--key HEX | --key-file FILE)
//            [--aad TEXT | --aad-hex HEX] [--json] (--base64 B64 | FILE | -)
//
//   --key HEX / --key-file FILE  the seal key: 64 hex digits (percore's "seal_key"; a key file may
//                                hold whitespace around them, as percore's key files may)
//   --aad TEXT / --aad-hex HEX   the caller's associated data (default: none)
//   --base64 B64                 the sealed bytes, base64; else read from FILE, or stdin ("-" or none)
//   --json                       print {"suite": "...", "plaintext_base64": "..."} and a newline
//                                instead of the bare plaintext
// Output: the plaintext's bytes on stdout (or the JSON line). Exit status: 0 opened; 1 not
// authentic (changed, cut, wrong key or wrong associated data); 2 usage error or not percore's
// sealed form (too short, unknown format byte, unknown suite).
//
// The sealed form (module_abi.h): format 0x01 | suite (1 = AES-256-GCM, 2 = ChaCha20-Poly1305) |
// 12-byte nonce | ciphertext (as long as the plaintext) | 16-byte tag: 30 bytes more than the
// plaintext. The AEAD key is the suite's subkey, HKDF-SHA256 of the 32-byte key (no salt, info
// "percore-seal-v1 aes-256-gcm" / "percore-seal-v1 chacha20-poly1305"); the AEAD's associated data
// is the 14 header bytes followed by the caller's associated data.

import { createDecipheriv, hkdfSync } from "node:crypto";
import { readFileSync } from "node:fs";

const USAGE =
    "usage: node open_sealed.mjs (--key HEX | --key-file FILE) [--aad TEXT | --aad-hex HEX] [--json] " +
    "(--base64 B64 | FILE | -)";
const FORMAT_V1 = 0x01;
const HEADER_BYTES = 14;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const SUITES = {
    1: { name: "aes-256-gcm", cipher: "aes-256-gcm" },
    2: { name: "chacha20-poly1305", cipher: "chacha20-poly1305" },
};

function fail(status, message) {
    process.stderr.write(`open_sealed: ${message}\n`);
    if (status === 2 && message.startsWith("usage")) process.stderr.write(`${USAGE}\n`);
    process.exit(status);
}

function hexBytes(text, what) {
    if (!/^([0-9a-fA-F]{2})*$/.test(text)) fail(2, `usage: ${what} is not hex digits`);
    return Buffer.from(text, "hex");
}

function parseArgs(argv) {
    const opts = { key: null, aad: Buffer.alloc(0), json: false, sealed: null, input: null };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => {
            if (i + 1 >= argv.length) fail(2, `usage: ${a} needs a value`);
            return argv[++i];
        };
        if (a === "--key") opts.key = value();
        else if (a === "--key-file") opts.key = readFileSync(value(), "latin1").trim();
        else if (a === "--aad") opts.aad = Buffer.from(value(), "utf8");
        else if (a === "--aad-hex") opts.aad = hexBytes(value(), "--aad-hex");
        else if (a === "--json") opts.json = true;
        else if (a === "--base64") opts.sealed = Buffer.from(value(), "base64");
        else if (a === "-h" || a === "--help") {
            process.stdout.write(`${USAGE}\n`);
            process.exit(0);
        } else if (a.startsWith("--")) fail(2, `usage: unknown option ${a}`);
        else if (opts.input === null) opts.input = a;
        else fail(2, `usage: one input at most (got ${opts.input} and ${a})`);
    }
    if (opts.key === null) fail(2, "usage: --key or --key-file is required");
    if (!/^[0-9a-fA-F]{64}$/.test(opts.key)) fail(2, "usage: the seal key must be exactly 64 hex digits (32 bytes)");
    opts.key = Buffer.from(opts.key, "hex");
    if (opts.sealed !== null && opts.input !== null) fail(2, "usage: --base64 and an input file exclude each other");
    if (opts.sealed === null) opts.sealed = readFileSync(opts.input === null || opts.input === "-" ? 0 : opts.input);
    return opts;
}

function open({ key, aad, sealed }) {
    if (sealed.length < HEADER_BYTES + TAG_BYTES)
        fail(2, `truncated: ${sealed.length} bytes, a sealed value has at least ${HEADER_BYTES + TAG_BYTES}`);
    if (sealed[0] !== FORMAT_V1) fail(2, `not sealed: format byte 0x${sealed[0].toString(16).padStart(2, "0")}`);
    const suite = SUITES[sealed[1]];
    if (suite === undefined) fail(2, `unknown suite ${sealed[1]}`);
    const header = sealed.subarray(0, HEADER_BYTES);
    const nonce = sealed.subarray(2, 2 + NONCE_BYTES);
    const ciphertext = sealed.subarray(HEADER_BYTES, sealed.length - TAG_BYTES);
    const tag = sealed.subarray(sealed.length - TAG_BYTES);
    const subkey = Buffer.from(hkdfSync("sha256", key, Buffer.alloc(0), `percore-seal-v1 ${suite.name}`, 32));
    const decipher = createDecipheriv(suite.cipher, subkey, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.concat([header, aad]), { plaintextLength: ciphertext.length });
    decipher.setAuthTag(tag);
    const plain = decipher.update(ciphertext);
    try {
        decipher.final(); // checks the tag; nothing is printed before it passed
    } catch {
        plain.fill(0);
        fail(1, `authentication failed (${suite.name}): changed, cut, wrong key or wrong associated data`);
    }
    return { suite: suite.name, plain };
}

const opts = parseArgs(process.argv.slice(2));
const { suite, plain } = open(opts);
if (opts.json) process.stdout.write(`${JSON.stringify({ suite, plaintext_base64: plain.toString("base64") })}\n`);
else process.stdout.write(plain);

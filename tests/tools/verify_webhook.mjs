#!/usr/bin/env node
// verify_webhook.mjs: checks the Standard Webhooks signatures of received requests with the
// reference library receivers use (npm `standardwebhooks`, pinned in package-lock.json), so
// percore's deliveries (SPEC §9) are judged by what a real receiver runs, not by our own code.
//
// usage: node tests/tools/verify_webhook.mjs (--secret whsec_... | --secret-file FILE)
//            [--at UNIX_SECONDS | --at-arrival] [--binary-bodies refuse|hmac] [FILE.jsonl | -]
//
// Input (FILE, or stdin when FILE is absent or "-"): JSON lines, one request per line, as
// tests/integration/webhook_receiver.py records them; stdin may also hold one (pretty-printed)
// JSON object. Each request: {"headers": [[name, value], ...] or {name: value},
// "body_base64": "...", "arrival": UNIX_SECONDS (optional)}; other fields are ignored.
//
// Output: one JSON line per request, in input order:
//   {"line": N, "id": <webhook-id or null>, "ok": true|false, "error": <text or null>,
//    "verifier": "standardwebhooks" | "node:crypto hmac"}
// Exit status: 0 when every request verified (and there was at least one), 1 when any failed,
// 2 on a usage or input error, 3 when tests/tools/node_modules is missing (bash .ci/deps).
//
// Time: the library refuses a webhook-timestamp more than 5 minutes from its clock, and has no
// option to skip that. By default its clock is now: verify promptly. --at UNIX_SECONDS runs each
// verification as if the clock read that time, --at-arrival as if it read the request's "arrival"
// (when the receiver got it): the tolerance still applies, relative to that moment, which is what
// a receiver that verified on arrival would have decided.
//
// Bodies that are not UTF-8 (sealed deliveries, application/vnd.percore.sealed): standardwebhooks
// 1.1.1 turns a Buffer payload into a string (Buffer.toString(), UTF-8 with U+FFFD for invalid
// sequences) and signs that string's UTF-8 encoding, so it cannot check a signature over arbitrary
// bytes: it rejects a correct one, and could accept a body changed in one invalid byte for another.
// So by default such a body fails with an error saying so (--binary-bodies refuse); with
// --binary-bodies hmac it is checked here with node:crypto instead (HMAC-SHA256 over
// id "." timestamp "." raw body, the same key, the same 5-minute tolerance and clock) and the
// line says "verifier": "node:crypto hmac".

import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";

const USAGE =
    "usage: node verify_webhook.mjs (--secret whsec_... | --secret-file FILE) " +
    "[--at UNIX_SECONDS | --at-arrival] [--binary-bodies refuse|hmac] [FILE.jsonl | -]";
const TOLERANCE_S = 5 * 60; // the library's, for the node:crypto path

function usage(message) {
    process.stderr.write(`verify_webhook: ${message}\n${USAGE}\n`);
    process.exit(2);
}

function parseArgs(argv) {
    const opts = { secret: null, at: null, atArrival: false, binary: "refuse", input: null };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const value = () => {
            if (i + 1 >= argv.length) usage(`${a} needs a value`);
            return argv[++i];
        };
        if (a === "--secret") opts.secret = value();
        else if (a === "--secret-file") opts.secret = readFileSync(value(), "utf8").trim();
        else if (a === "--at") {
            const v = value();
            if (!/^\d+(\.\d+)?$/.test(v)) usage(`--at takes UNIX seconds, not ${JSON.stringify(v)}`);
            opts.at = Number(v);
        } else if (a === "--at-arrival") opts.atArrival = true;
        else if (a === "--binary-bodies") {
            opts.binary = value();
            if (opts.binary !== "refuse" && opts.binary !== "hmac") usage("--binary-bodies is refuse or hmac");
        } else if (a === "-h" || a === "--help") {
            process.stdout.write(`${USAGE}\n`);
            process.exit(0);
        } else if (a.startsWith("--")) usage(`unknown option ${a}`);
        else if (opts.input === null) opts.input = a;
        else usage(`one input file at most (got ${opts.input} and ${a})`);
    }
    if (opts.secret === null) usage("--secret or --secret-file is required");
    if (!opts.secret.startsWith("whsec_")) usage("the secret must start with whsec_ (as percore hands it out)");
    if (opts.at !== null && opts.atArrival) usage("--at and --at-arrival exclude each other");
    return opts;
}

function readRequests(input) {
    const text = input === null || input === "-" ? readFileSync(0, "utf8") : readFileSync(input, "utf8");
    if (input === null || input === "-") {
        try {
            const one = JSON.parse(text);
            if (one !== null && typeof one === "object" && !Array.isArray(one)) return [{ line: 1, request: one }];
        } catch {
            // not one object: JSON lines
        }
    }
    const requests = [];
    text.split("\n").forEach((raw, index) => {
        if (raw.trim() === "") return;
        let request;
        try {
            request = JSON.parse(raw);
        } catch (e) {
            process.stderr.write(`verify_webhook: line ${index + 1} is not JSON: ${e.message}\n`);
            process.exit(2);
        }
        requests.push({ line: index + 1, request });
    });
    return requests;
}

// Header names lower-cased; a webhook-* header given more than once is an error (which one counts
// would be the receiver's guess).
function headerObject(headers) {
    const pairs = Array.isArray(headers) ? headers : Object.entries(headers ?? {});
    const out = {};
    for (const pair of pairs) {
        if (!Array.isArray(pair) || pair.length !== 2) throw new Error("headers must be [name, value] pairs");
        const name = String(pair[0]).toLowerCase();
        if (name in out && name.startsWith("webhook-")) throw new Error(`header ${name} appears more than once`);
        out[name] = String(pair[1]);
    }
    return out;
}

function withClock(seconds, fn) {
    if (seconds === null) return fn();
    const realNow = Date.now;
    Date.now = () => Math.round(seconds * 1000);
    try {
        return fn();
    } finally {
        Date.now = realNow;
    }
}

function isUtf8(bytes) {
    try {
        new TextDecoder("utf-8", { fatal: true }).decode(bytes);
        return true;
    } catch {
        return false;
    }
}

// The node:crypto check of a non-UTF-8 body: Standard Webhooks' rules on the raw bytes.
function verifyBytes(secret, headers, body, clockSeconds) {
    const id = headers["webhook-id"];
    const timestamp = headers["webhook-timestamp"];
    const signatures = headers["webhook-signature"];
    if (!id || !timestamp || !signatures) throw new Error("Missing required headers");
    if (!/^\d+$/.test(timestamp)) throw new Error("Invalid Signature Headers");
    const now = Math.floor(clockSeconds ?? Date.now() / 1000);
    const ts = Number(timestamp);
    if (now - ts > TOLERANCE_S) throw new Error("Message timestamp too old");
    if (ts > now + TOLERANCE_S) throw new Error("Message timestamp too new");
    const key = Buffer.from(secret.slice("whsec_".length), "base64");
    const expected = createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest();
    for (const versioned of signatures.split(" ")) {
        const [version, signature] = versioned.split(",");
        if (version !== "v1" || signature === undefined) continue;
        const given = Buffer.from(signature, "base64");
        if (given.length === expected.length && timingSafeEqual(given, expected)) return;
    }
    throw new Error("No matching signature found");
}

async function main() {
    const opts = parseArgs(process.argv.slice(2));
    let Webhook;
    try {
        ({ Webhook } = await import("standardwebhooks"));
    } catch (e) {
        process.stderr.write(
            `verify_webhook: cannot load the standardwebhooks package (${e.code ?? e.message}); ` +
                "bash .ci/deps installs tests/tools/node_modules\n",
        );
        process.exit(3);
    }
    const webhook = new Webhook(opts.secret);
    const requests = readRequests(opts.input);
    if (requests.length === 0) {
        process.stderr.write("verify_webhook: no request in the input\n");
        process.exit(2);
    }
    let failed = 0;
    for (const { line, request } of requests) {
        const result = { line, id: null, ok: false, error: null, verifier: "standardwebhooks" };
        try {
            const headers = headerObject(request.headers);
            result.id = headers["webhook-id"] ?? null;
            if (typeof request.body_base64 !== "string") throw new Error("no body_base64 in the request");
            const body = Buffer.from(request.body_base64, "base64");
            let clock = opts.at;
            if (opts.atArrival) {
                if (typeof request.arrival !== "number") throw new Error("--at-arrival: the request has no arrival time");
                clock = request.arrival;
            }
            if (isUtf8(body)) {
                // the library's own check, timestamp tolerance included; jsonParse off: the body's
                // content is not the signature's business (and a sealed body is no JSON)
                withClock(clock, () => webhook.verify(body, headers, { jsonParse: false }));
            } else if (opts.binary === "hmac") {
                result.verifier = "node:crypto hmac";
                verifyBytes(opts.secret, headers, body, clock);
            } else {
                throw new Error(
                    "the body is not UTF-8, which standardwebhooks cannot verify (it signs Buffer.toString()); " +
                        "--binary-bodies hmac checks it with node:crypto",
                );
            }
            result.ok = true;
        } catch (e) {
            result.error = e instanceof Error ? e.message : String(e);
            failed++;
        }
        process.stdout.write(`${JSON.stringify(result)}\n`);
    }
    process.exit(failed === 0 ? 0 : 1);
}

await main();

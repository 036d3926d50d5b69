// options: the command line of percore-load.
//
// Contract
// - parse_options() reads `--name value` pairs (and the flags --if-match, --prepare) and returns
//   either a complete, validated options value or a one-line error message; it never exits.
// - Every limit is checked here (connections >= 1, pipeline >= 1, get+put == 100, ...), so the
//   rest of the program may rely on the values.
// - Combinations that make no sense are refused here too, whatever the order on the command line:
//   --path only GETs, so it is refused with a put share in --mix, with --prepare, with --if-match
//   and with --style etcd; --style etcd is refused with --if-match (etcd has no ETags).
// - --header 'Name: value' (repeatable, at most max_headers, max_header_bytes in all) is sent
//   as given on every request, whatever the style (an Authorization token, say). The name must
//   be an HTTP token and the value visible ASCII, spaces and tabs (no CR or LF: it cannot smuggle
//   a second field or request). The fields the generator frames itself (Host, Content-Length,
//   Transfer-Encoding, Connection) are refused: --mode and --size say those.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <vector>
#include <netinet/in.h>

namespace percore::load {

inline constexpr std::uint32_t max_connections = 100000;
inline constexpr std::uint32_t max_threads = 1024;
inline constexpr std::uint32_t max_pipeline = 1024;
inline constexpr std::uint64_t max_body_size = 64u << 20;
inline constexpr std::size_t max_app_bytes = 64;
inline constexpr std::size_t max_path_bytes = 512;
inline constexpr std::size_t max_headers = 32;
inline constexpr std::size_t max_header_bytes = 8192;   // all --header fields, with their CRLFs

enum class connection_mode { keep_alive, close };

// How requests are spelled:
//   percore: GET/PUT /APP/kKEY (PUT body: --size bytes);
//   etcd:    etcd v3's JSON gateway; a PUT is POST /v3/kv/put {"key":B64(APP/kKEY),"value":B64(body)},
//            a GET is POST /v3/kv/range {"key":B64(APP/kKEY)}.
enum class request_style { percore, etcd };

struct options {
    std::string host = "127.0.0.1";     // as given, used for the Host header
    sockaddr_in address{};               // resolved IPv4 address and port
    std::uint32_t connections = 64;
    std::uint32_t threads = 1;
    double duration_s = 5.0;             // 0: with --prepare, stop after preparing
    connection_mode mode = connection_mode::keep_alive;
    std::uint32_t pipeline = 1;
    std::uint32_t get_percent = 100;
    std::uint32_t put_percent = 0;
    std::uint64_t keys = 1000;
    std::uint64_t size = 64;
    std::string app = "bench";
    std::string path;                    // empty = /APP/kKEY; else every request is GET of exactly
                                         // this ('/' first, <= max_path_bytes of visible ASCII)
    request_style style = request_style::percore;
    std::vector<std::string> headers;    // --header fields as given, without CRLF
    std::string header_block;            // the same, each followed by CRLF: what a request carries
    bool if_match = false;
    double rate = 0.0;                   // total requests/s; 0 = as fast as possible
    std::string json_path;               // empty = no JSON; "-" = stdout
    bool prepare = false;
};

std::expected<options, std::string> parse_options(int argc, char** argv);

const char* usage_text();

const char* style_name(request_style s);

}  // namespace percore::load

// admin_command: `percore admin`, the operator's client of the HTTP API, in the manner of etcdctl
// and redis-cli: one command per run, an answer printed for people (tables) or for scripts
// (--json: the server's JSON as it came).
//
//   percore admin [--server URL] [--token-file FILE] [--data DIR] [--ca-file FILE] [--json] COMMAND …
//
// Contract
// - Commands: status; apps list|get APP|put APP [QUOTA=N …]|delete APP; tokens list APP|create APP
//   --scope S [--prefix P] [--ttl S]|revoke APP ID; deliveries list APP|get APP NAME|put APP NAME
//   --url URL [--prefix P] [--seal] [--ca-pem-file F] [--since S]|delete APP NAME;
//   replication-tokens list|create [--ttl S]|revoke ID; backup (GET /_backup's tar to standard
//   output as it arrives, refused when that is a terminal). Each is one request of docs/api.md
//   (status: /_health, then /_apps/ when the token may list apps).
// - The server: --server, else PERCORE_SERVER, else http:// and PERCORE_LISTEN (serve's own
//   variable), else http://127.0.0.1:8080 (serve's default). The token: --token-file, else
//   DATA/admin.token with DATA from --data, PERCORE_DATA or ./percore-data (serve's default); no
//   file there: no token (a server with auth off needs none). HTTPS: --ca-file (PEM), else the
//   system's CAs.
// - Exit status: 0 the server did it (2xx); 1 it refused (one line: the status and the server's
//   error) or could not be reached (one line saying why); 2 a usage error (one line, and the usage).
// - Thread: main's; it blocks on the server (admin_client.hpp).
#pragma once

namespace percore::shards {

int run_admin(int argc, char** argv);
const char* admin_usage();

}  // namespace percore::shards

// admin_tables: how `percore admin` prints the server's answers — for people, a table or a few
// "name value" lines per command; for scripts (--json), the server's JSON as it came, one line.
//
// Contract
// - Pure functions of an answer (admin_client.hpp); nothing here talks to a server.
// - An answer whose body is not the JSON its command expects is printed as it came, never dropped.
// - Secrets the server shows once (a token, a signing secret, a seal key) are printed with a line
//   saying so; nothing else is printed from a token.
#pragma once

#include <string>

#include "shards/admin/admin_client.hpp"

namespace percore::shards {

enum class admin_view : unsigned char {
    done,             // a write: "created", "updated" or "deleted" after its status
    health,           // status
    app_list, app,
    token_list, token_created,
    delivery_list, delivery, delivery_created,
    download,         // backup: the body to standard output, as it came
};

// "404 no such app": the status and the server's {"error":…} (or the body's first line).
std::string refusal_line(int status, const std::string& body);
// --json: the body and a newline (nothing for an answer without a body).
std::string json_text(const admin_answer& answer);
// For people: the answer as its command shows it.
std::string view_text(admin_view view, const admin_answer& answer);
// status: /_health's answer, and /_apps/'s when the token could list apps (null otherwise).
std::string status_text(const admin_answer& health, const admin_answer* apps, bool json);

}  // namespace percore::shards

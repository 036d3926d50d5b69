#include "shards/admin/admin_tables.hpp"

#include <algorithm>
#include <string_view>
#include <vector>

#include "shards/base/json_text.hpp"
#include "shards/base/json_value.hpp"

namespace percore::shards {

namespace {

// A JSON value as one cell: strings bare, null as "-", numbers and booleans as written.
std::string cell(const json_value* v) {
    if (!v || v->what == json_value::kind::null) return "-";
    if (v->what == json_value::kind::boolean) return v->flag ? "true" : "false";
    if (v->what == json_value::kind::object || v->what == json_value::kind::array) return "…";
    return v->text;
}

// Rows under a header, each column as wide as its widest cell.
std::string table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> width;
    for (const auto& r : rows)
        for (std::size_t i = 0; i < r.size(); ++i) {
            if (width.size() <= i) width.push_back(0);
            width[i] = std::max(width[i], r[i].size());
        }
    std::string out;
    for (const auto& r : rows) {
        for (std::size_t i = 0; i < r.size(); ++i) {
            out.append(r[i]);
            if (i + 1 < r.size()) out.append(width[i] - r[i].size() + 2, ' ');
        }
        out.push_back('\n');
    }
    return out;
}

// "name value" lines of an object's members, nested objects as "name.member".
void lines_of(const json_value& object, const std::string& prefix, std::vector<std::vector<std::string>>& rows) {
    for (std::size_t i = 0; i < object.items.size(); ++i) {
        const std::string name = prefix + object.names[i];
        if (object.items[i].what == json_value::kind::object) lines_of(object.items[i], name + ".", rows);
        else rows.push_back({name, cell(&object.items[i])});
    }
}

std::string names_of(const json_value& doc, std::string_view member) {
    std::string out;
    if (const json_value* list = doc.find(member))
        for (const auto& v : list->items) out.append(cell(&v)).push_back('\n');
    return out;
}

std::string tokens_table(const json_value& doc) {
    std::vector<std::vector<std::string>> rows{{"ID", "SCOPE", "PREFIX", "EXPIRES", "LAST_USED"}};
    if (const json_value* list = doc.find("tokens"))
        for (const auto& t : list->items)
            rows.push_back({cell(t.find("id")), cell(t.find("scope")), cell(t.find("prefix")), cell(t.find("expires")),
                            cell(t.find("last_used"))});
    return table(rows);
}

std::string shown_once(const json_value& doc) {
    std::vector<std::vector<std::string>> rows;
    lines_of(doc, "", rows);
    return table(rows) + "(secrets are shown once: keep them now)\n";
}

std::string done_text(int status) {
    return status == 201 ? "created\n" : "done\n";
}

}  // namespace

std::string refusal_line(int status, const std::string& body) {
    std::string why;
    if (auto doc = parse_json(body); doc && doc->find("error")) why = cell(doc->find("error"));
    else why = body.substr(0, body.find('\n'));
    return std::to_string(status) + (why.empty() ? "" : " " + why);
}

std::string json_text(const admin_answer& answer) {
    if (answer.body.empty()) return "";
    return answer.body.ends_with('\n') ? answer.body : answer.body + "\n";
}

std::string view_text(admin_view view, const admin_answer& answer) {
    if (view == admin_view::done) return done_text(answer.status);
    auto doc = parse_json(answer.body);
    if (!doc || doc->what != json_value::kind::object) return json_text(answer);
    std::vector<std::vector<std::string>> rows;
    switch (view) {
    case admin_view::app_list: return names_of(*doc, "apps");
    case admin_view::delivery_list: return names_of(*doc, "deliveries");
    case admin_view::token_list: return tokens_table(*doc);
    case admin_view::token_created:
    case admin_view::delivery_created: return shown_once(*doc);
    case admin_view::app:
    case admin_view::delivery:
    case admin_view::health:
    case admin_view::download:
    case admin_view::done: break;
    }
    lines_of(*doc, "", rows);
    return table(rows);
}

std::string status_text(const admin_answer& health, const admin_answer* apps, bool json) {
    if (json) {
        std::string out = "{\"health\":" + (health.body.empty() ? std::string("null") : health.body);
        out.append(",\"health_status\":").append(std::to_string(health.status));
        out.append(",\"apps\":").append(apps ? apps->body : std::string("null"));
        return out + "}\n";
    }
    std::vector<std::vector<std::string>> rows{{"http", std::to_string(health.status)}};
    if (auto doc = parse_json(health.body); doc && doc->what == json_value::kind::object) lines_of(*doc, "", rows);
    if (apps)
        if (auto doc = parse_json(apps->body); doc && doc->find("apps"))
            rows.push_back({"apps", std::to_string(doc->find("apps")->items.size())});
    return table(rows);
}

}  // namespace percore::shards

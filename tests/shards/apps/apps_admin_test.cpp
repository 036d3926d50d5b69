// apps_admin (shards/apps/apps_admin.hpp) at start: the catalog a directory holds goes into the
// registry, and a record that names no valid app (an older follower stored one from a bad page,
// security review M2) is skipped, never an abort in the registry's REQUIRES.
#include <doctest.h>

#include <string>

#include "../task_fixtures.hpp"
#include "shards/apps/access.hpp"
#include "shards/apps/app_erasures.hpp"
#include "shards/apps/apps_admin.hpp"
#include "shards/apps/catalog.hpp"

using namespace percore;
using namespace percore::shards;

TEST_CASE("at start, catalog records naming an invalid app are skipped and the valid ones kept") {
    testing::task_stores stores{1};
    const std::string long_name(net::max_app_bytes + 1, 'a');
    stores.put(catalog_key(app_records, "notes"), encode_app_record(app_quota{}), "application/json");
    stores.put(catalog_key(app_records, long_name), encode_app_record(app_quota{}), "application/json");
    stores.put(catalog_key(app_records, "Bad"), encode_app_record(app_quota{}), "application/json");
    stores.put(catalog_key(deleted_records, long_name), "{}", "application/json");
    auth_config off;
    access_control access(stores, stores.registry, off);
    app_erasures erasures(stores, stores);
    apps_admin admin(stores, stores.registry, access, stores, erasures);
    admin.recovered(*stores.current(0), false);
    const app_entry* notes = stores.registry.find("notes");
    REQUIRE(notes != nullptr);
    CHECK(notes->exists());
    CHECK(stores.registry.find("Bad") == nullptr);
}

// data_layout: what lives under --data and how it changes when the shard count does.
//
//   DATA/LOCK                      flock while a server uses the directory (data_directory.hpp)
//   DATA/FORMAT                    "percore-data <format version>\nlayout <G>\nshards <N>\n"
//                                  "directory <16 hex>\n" (a random id, made once per directory and
//                                  kept across reshardings; a FORMAT without the line, written before
//                                  it existed, gets one at the next start; older readers ignore it)
//   DATA/layout-<G>/shard-<NNN>/   one directory per shard: its segment files (log_format.hpp)
//
// Contract
// - open_layout() (main thread, before the shards start) reads FORMAT, refusing a format version it
//   does not know. A new directory gets layout 1 for `shards`.
// - Resharding: when FORMAT names another shard count, every live document is copied, with its
//   versions (a copy keeps its ETag version: log_format.hpp, kind 5), into a new layout G+1 where
//   owner_of(key) says it belongs; the new files and directories are synced, then FORMAT is
//   replaced atomically (write, fsync, rename, fsync the directory), then the old layout is removed.
//   A kill at any moment leaves either the old layout (and a partial new one, removed at the next
//   start) or the new one: nothing is lost.
// - Directories of layouts other than the current one are removed at start.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <string>
#include <string_view>

#include "store/env.hpp"

namespace percore::store {

inline constexpr std::uint32_t data_format_version = 1;

struct data_layout {
    std::string root;
    std::uint64_t generation = 1;
    unsigned shards = 1;
    // Random, fixed for the directory's life: the change feed's cursors name it (with the layout
    // generation), so a cursor of another directory is recognised, never misread (SPEC §8).
    std::uint64_t directory_id = 0;
    std::string shard_directory(unsigned shard) const;
};

using owner_function = std::function<unsigned(std::string_view key, unsigned shards)>;
using log_function = std::function<void(const std::string& line)>;

result<data_layout> open_layout(env& e, const std::string& root, unsigned shards,
                                                    const owner_function& owner_of, const log_function& log);

// The layout FORMAT names, read only (percore check): an error when FORMAT cannot be read, is not
// one, or has a format version this build does not know. directory_id 0: FORMAT has no id line.
result<data_layout> read_layout(env& e, const std::string& root);

// Whether the layout directory `layout` (DATA/layout-<G>) holds a segment file in a shard directory.
bool holds_segments(env& e, const std::string& layout);

}  // namespace percore::store

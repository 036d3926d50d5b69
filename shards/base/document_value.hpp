// document_value: a listed document's value, wherever its snapshot keeps it (in memory, or in its
// segment file).
//
// Contract: inside the reader round that found the document (its snapshot is alive), any shard's
// thread; `scratch` is the caller's.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "shards/base/result.hpp"
#include "store/snapshot.hpp"

namespace percore::shards {

// A listed document's value: in memory, or read whole from its segment file into `scratch` (the
// view then points there). Inside the reader round that found the document.
result<std::string_view> document_value(const store::snapshot& snap,
                                                                          const store::document& doc,
                                                                          std::string& scratch);

}  // namespace percore::shards

#include "crypto/result.hpp"

namespace percore::crypto {

std::string_view to_string(errc code) {
    switch (code) {
    case errc::module_not_found: return "crypto module not found";
    case errc::module_refused: return "crypto module refused";
    case errc::unusable_file: return "unusable file";
    case errc::out_of_memory: return "out of memory";
    case errc::output_too_small: return "output buffer too small";
    case errc::truncated: return "sealed value truncated";
    case errc::not_sealed: return "not a sealed value";
    case errc::unknown_suite: return "sealed with an unknown suite";
    case errc::authentication_failed: return "sealed value altered, or wrong key or associated data";
    case errc::internal: return "crypto library failure";
    }
    return "crypto library failure";
}

error file_error(std::string_view module_reason) {
    return error(module_reason == "out of memory" ? errc::out_of_memory : errc::unusable_file,
                 std::string(module_reason));
}

}  // namespace percore::crypto

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "crypto/loader.hpp"
#include "shards/runtime/check.hpp"

#ifndef PERCORE_CRYPTO_LIBDIR
#define PERCORE_CRYPTO_LIBDIR "/usr/local/lib/percore"
#endif
#ifndef PERCORE_CRYPTO_FROM_BINDIR
#define PERCORE_CRYPTO_FROM_BINDIR "../lib/percore"
#endif

namespace percore::crypto {

namespace {

constexpr std::size_t max_path_bytes = 4096;

std::string folder_of(std::string_view path) {
    std::size_t slash = path.rfind('/');
    if (slash == std::string_view::npos) return ".";
    if (slash == 0) return "/";
    return std::string(path.substr(0, slash));
}

std::string join(std::string_view folder, std::string_view name) {
    std::string path(folder);
    if (path.empty() || path.back() != '/') path += '/';
    path += name;
    return path;
}

// `relative` ("../lib/percore") followed from `folder`, its ".." taken lexically: the binary's
// folder is /proc/self/exe's, where links are already resolved.
std::string follow(std::string folder, std::string_view relative) {
    while (!relative.empty()) {
        std::size_t slash = relative.find('/');
        std::string_view part = relative.substr(0, slash);
        relative = slash == std::string_view::npos ? std::string_view() : relative.substr(slash + 1);
        if (part == "..") folder = folder_of(folder);
        else if (!part.empty() && part != ".") folder = join(folder, part);
    }
    return folder;
}

std::string running_executable() {
    char buf[max_path_bytes];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return {};
    return std::string(buf, static_cast<std::size_t>(n));
}

std::string join_list(const std::vector<std::string>& paths) {
    std::string text;
    for (const std::string& path : paths) {
        if (!text.empty()) text += ", ";
        text += path;
    }
    return text;
}

result<const crypto_api*> open_module(const std::string& path) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = ::dlerror();
        return std::unexpected(error(errc::module_refused, "cannot load crypto module " + path + ": " +
                                                               (why != nullptr ? why : "dlopen failed")));
    }
    auto get = reinterpret_cast<percore_crypto_v1_get_fn>(::dlsym(handle, PERCORE_CRYPTO_ENTRY_SYMBOL));
    const crypto_api* api = get != nullptr ? get() : nullptr;
    std::string refusal;
    if (api == nullptr) {
        refusal = path + " is not a percore crypto module (it has no " PERCORE_CRYPTO_ENTRY_SYMBOL ")";
    } else if (api->abi_version != PERCORE_CRYPTO_ABI_VERSION) {
        refusal = "crypto module " + path + " has ABI version " + std::to_string(api->abi_version) +
                  "; this percore needs version " + std::to_string(PERCORE_CRYPTO_ABI_VERSION);
    } else if (api->struct_size < sizeof(crypto_api)) {
        refusal = "crypto module " + path + " is older than this percore (its table has " +
                  std::to_string(api->struct_size) + " bytes, " + std::to_string(sizeof(crypto_api)) + " needed)";
    }
    if (!refusal.empty()) {
        ::dlclose(handle);
        return std::unexpected(error(errc::module_refused, std::move(refusal)));
    }
    return api;  // the handle stays open for the life of the process
}

}  // namespace

std::string_view installed_module_folder() { return PERCORE_CRYPTO_LIBDIR; }

std::string_view installed_module_folder_from_binary() { return PERCORE_CRYPTO_FROM_BINDIR; }

std::vector<std::string> module_candidates(std::string_view executable_path, const char* module_variable,
                                           std::string_view installed_folder,
                                           std::string_view folder_from_binary) {
    if (module_variable != nullptr && *module_variable != '\0') return {std::string(module_variable)};
    std::vector<std::string> candidates;
    auto add = [&](std::string path) {
        for (const std::string& known : candidates)
            if (known == path) return;
        candidates.push_back(std::move(path));
    };
    if (!executable_path.empty()) {
        std::string bin = folder_of(executable_path);
        add(join(bin, module_file_name));
        add(join(join(folder_of(bin), "crypto"), module_file_name));
        if (!folder_from_binary.empty()) add(join(follow(bin, folder_from_binary), module_file_name));
    }
    if (!installed_folder.empty()) add(join(installed_folder, module_file_name));
    return candidates;
}

result<const crypto_api*> load_crypto_module_from(const std::vector<std::string>& candidates) {
    for (const std::string& path : candidates) {
        PERCORE_REQUIRES(!path.empty());
        struct stat st{};
        if (::stat(path.c_str(), &st) != 0) {
            if (errno == ENOENT || errno == ENOTDIR) continue;
            return std::unexpected(
                error(errc::module_refused, "cannot use crypto module " + path + ": " + std::strerror(errno)));
        }
        return open_module(path);
    }
    if (candidates.size() == 1)
        return std::unexpected(error(errc::module_not_found, "crypto module " + candidates.front() + " not found"));
    return std::unexpected(error(errc::module_not_found,
                                 "crypto module " + std::string(module_file_name) + " not found (tried " +
                                     join_list(candidates) + "); set " + std::string(module_path_variable) +
                                     " to its path"));
}

result<const crypto_api*> load_crypto_module() {
    static const result<const crypto_api*> loaded = [] {
        std::string variable(module_path_variable);
        return load_crypto_module_from(
            module_candidates(running_executable(), std::getenv(variable.c_str()), installed_module_folder(),
                              installed_module_folder_from_binary()));
    }();
    return loaded;
}

}  // namespace percore::crypto

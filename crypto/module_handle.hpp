// module_handle<T, Free>: the one owning handle for an object the crypto module made — the table
// it came from and the pointer, moved never copied, handed back to the module's own free function
// (`Free`, a member of the table) when it goes. tls_connection, tls_server and seal_key are each
// one of these plus their operations.
//
// Thread: whoever owns the handle; the module's objects are not shared unless their header says.
#pragma once

#include <utility>

#include "crypto/loader.hpp"

namespace percore::crypto {

template <class T, auto Free>
class module_handle {
public:
    module_handle() = default;
    // Takes ownership of `object` (made by `api`).
    module_handle(const crypto_api& api, T* object) : api_(&api), object_(object) {}
    module_handle(module_handle&& other) noexcept : api_(other.api_), object_(std::exchange(other.object_, nullptr)) {}
    module_handle& operator=(module_handle&& other) noexcept {
        if (this != &other) {
            reset();
            api_ = other.api_;
            object_ = std::exchange(other.object_, nullptr);
        }
        return *this;
    }
    module_handle(const module_handle&) = delete;
    module_handle& operator=(const module_handle&) = delete;
    ~module_handle() { reset(); }

    explicit operator bool() const { return object_ != nullptr; }
    T* native() const { return object_; }

protected:
    void reset() {
        if (object_ != nullptr) (api_->*Free)(object_);
        object_ = nullptr;
    }

    const crypto_api* api_ = nullptr;
    T* object_ = nullptr;
};

}  // namespace percore::crypto

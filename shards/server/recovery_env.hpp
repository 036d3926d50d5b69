// recovery_env: the store's env for one shard (see the class comment).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "shards/server/shard_context.hpp"
#include "store/env.hpp"

namespace percore::shards {

// posix_env() for the store, except that while the shard recovers, every read (list, open, read)
// fails with ECANCELED once the group stops. Recovery then returns an error before it decides
// anything from what it read: a failed read never removes or truncates a file (store/recovery.cpp).
// After recovery it only passes calls through; the store keeps it for compaction and value reads.
class recovery_env final : public store::env {
public:
    explicit recovery_env(const shard_context& context) : context_(context) {}

    void finish() { recovering_.store(false, std::memory_order_relaxed); }
    bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

    store::io_result<std::unique_ptr<store::readable_file>> open_readable(const std::string& path) override {
        if (cancel()) return std::unexpected(ECANCELED);
        auto f = base_.open_readable(path);
        if (!f) return std::unexpected(f.error());
        return std::make_unique<file>(*this, std::move(*f));
    }
    store::io_result<std::unique_ptr<store::writable_file>> open_writable(const std::string& path) override {
        return base_.open_writable(path);
    }
    store::io_result<std::vector<std::string>> list(const std::string& directory) override {
        if (cancel()) return std::unexpected(ECANCELED);
        return base_.list(directory);
    }
    store::io_result<void> create_directory(const std::string& path) override { return base_.create_directory(path); }
    store::io_result<void> remove(const std::string& path) override { return base_.remove(path); }
    store::io_result<void> rename(const std::string& from, const std::string& to) override {
        return base_.rename(from, to);
    }
    store::io_result<void> sync_directory(const std::string& path) override { return base_.sync_directory(path); }
    bool exists(const std::string& path) override { return base_.exists(path); }

private:
    class file final : public store::readable_file {
    public:
        file(recovery_env& env, std::unique_ptr<store::readable_file> base) : env_(env), base_(std::move(base)) {}
        store::io_result<std::size_t> read_at(std::uint64_t offset, std::span<char> out) override {
            if (env_.cancel()) return std::unexpected(ECANCELED);
            return base_->read_at(offset, out);
        }
        store::io_result<std::uint64_t> size() override { return base_->size(); }
        int descriptor() const override { return base_->descriptor(); }

    private:
        recovery_env& env_;
        std::unique_ptr<store::readable_file> base_;
    };

    bool cancel() {
        if (!recovering_.load(std::memory_order_relaxed) || !context_.threads->stopping()) return false;
        cancelled_.store(true, std::memory_order_relaxed);
        return true;
    }

    const shard_context& context_;
    store::env& base_ = store::posix_env();
    std::atomic<bool> recovering_{true};
    std::atomic<bool> cancelled_{false};
};

}  // namespace percore::shards

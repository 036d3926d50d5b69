// sync_cost: does preallocating a segment save fdatasync time on this file system?
//
// Appends 4 KiB batches and fdatasyncs each, for a few seconds, three ways:
//   append       the file grows with every batch (the size changes: metadata to journal)
//   fallocate    space reserved with fallocate() first (size set, extents unwritten: ext4 still
//                journals their conversion to written)
//   zero-filled  the file written with zeros and synced first, then overwritten in place
// Prints syncs per second for each, best of three rounds, rotating the order.
// Usage: sync_cost DIRECTORY [seconds_per_case]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::size_t batch_bytes = 4096;
constexpr std::size_t file_bytes = 256u << 20;

double run(const std::string& path, int mode, double seconds) {
    ::unlink(path.c_str());
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::perror("open");
        std::exit(1);
    }
    std::vector<char> zeros(1 << 20, 0);
    if (mode == 1 && ::posix_fallocate(fd, 0, static_cast<off_t>(file_bytes)) != 0) std::perror("fallocate");
    if (mode == 2) {
        for (std::size_t done = 0; done < file_bytes; done += zeros.size())
            if (::write(fd, zeros.data(), zeros.size()) < 0) std::perror("write");
        ::fsync(fd);
    }
    std::vector<char> batch(batch_bytes, 'x');
    auto start = std::chrono::steady_clock::now();
    std::size_t syncs = 0;
    off_t offset = 0;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds &&
           static_cast<std::size_t>(offset) + batch_bytes <= file_bytes) {
        if (::pwrite(fd, batch.data(), batch.size(), offset) != static_cast<ssize_t>(batch.size())) std::perror("pwrite");
        offset += static_cast<off_t>(batch.size());
        if (::fdatasync(fd) != 0) std::perror("fdatasync");
        ++syncs;
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ::close(fd);
    ::unlink(path.c_str());
    return static_cast<double>(syncs) / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: sync_cost DIRECTORY [seconds]\n");
        return 2;
    }
    std::string path = std::string(argv[1]) + "/sync_cost.tmp";
    double seconds = argc > 2 ? std::atof(argv[2]) : 3;
    const char* names[] = {"append", "fallocate", "zero-filled"};
    double best[3] = {0, 0, 0};
    for (int round = 0; round < 3; ++round)
        for (int i = 0; i < 3; ++i) {
            int mode = (i + round) % 3;
            double rate = run(path, mode, seconds);
            std::printf("round %d %-12s %8.0f syncs/s\n", round, names[mode], rate);
            if (rate > best[mode]) best[mode] = rate;
        }
    std::printf("{\"append\":%.0f,\"fallocate\":%.0f,\"zero_filled\":%.0f}\n", best[0], best[1], best[2]);
}

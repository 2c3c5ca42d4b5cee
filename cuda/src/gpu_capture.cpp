#include "daqiri/gpu_capture.hpp"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "daqiri/cuda/cuda_error.hpp"
#include "daqiri/cuda/cufile_api.hpp"
#include "daqiri/cuda/driver_api.hpp"
#include "daqiri/gpu_payload_offsets.hpp"
#include "gpu_capture_kernel.hpp"

namespace daqiri::capture {
namespace {

// Records per kernel launch: bounds the pinned descriptor and offset arrays.
constexpr uint32_t kMaxRecordsPerPass = 4096;
constexpr size_t kMinChunk = size_t{1} << 20;

Error cuda_failure(cudaError_t e, const std::string& what) {
  return cuda_error(e, "capture: " + what);
}

// cudaMalloc and cudaHostAlloc into typed pointers (the typed overloads are in cuda_runtime.h,
// which is for nvcc).
template <typename T>
cudaError_t device_alloc(T*& p, size_t bytes) {
  void* v = nullptr;
  cudaError_t e = cudaMalloc(&v, bytes);
  p = static_cast<T*>(v);
  return e;
}
template <typename T>
cudaError_t pinned_alloc(T*& p, size_t bytes) {
  void* v = nullptr;
  cudaError_t e = cudaHostAlloc(&v, bytes, cudaHostAllocDefault);
  p = static_cast<T*>(v);
  return e;
}

}  // namespace

struct GpuFileWriter::State {
  GpuRingView view{};
  uint32_t slot_size = 0;
  std::string path;
  WriterOptions options;
  std::vector<std::byte> header;
  bool rotating = false;

  const cuda::DriverApi* api = nullptr;
  cuda::PrimaryContext ctx;
  cudaStream_t stream = nullptr;
  size_t capacity = 0;            // of device_buf (and host_buf)
  uint8_t* device_buf = nullptr;  // the records of one pass, as they go to the file
  uint64_t* device_offsets = nullptr;
  uint64_t* host_offsets = nullptr;      // pinned
  daqiri_rx_desc* host_descs = nullptr;  // pinned: the pass's descriptors, to plan offsets
  uint8_t* host_buf = nullptr;           // pinned: host staging only

  const cuda::CuFileApi* cufile = nullptr;  // null: host staging
  bool buf_registered = false;
  cuda::CuFileApi::Handle handle = nullptr;
  std::string data_path;

  UniqueFd fd;
  uint64_t file_index = 0;
  uint64_t file_offset = 0;  // bytes in the current file
  uint64_t buffered = 0;     // bytes of records in device_buf, not yet in the file
  uint64_t file_records = 0;
  std::chrono::steady_clock::time_point file_started;
  std::vector<std::string> files;
  WriterStats stats;
  std::optional<Error> error;
  bool closed = false;

  ~State() {
    (void)close_file();
    auto scope = cuda::ContextScope::enter(*api, ctx.get());
    if (!scope) return;
    if (stream != nullptr) cudaStreamSynchronize(stream);
    if (buf_registered) cufile->buf_deregister(device_buf);
    cudaFree(device_buf);
    cudaFree(device_offsets);
    cudaFreeHost(host_offsets);
    cudaFreeHost(host_descs);
    cudaFreeHost(host_buf);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  Result<> allocate() {
    cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = device_alloc(device_buf, capacity);
    if (e == cudaSuccess) e = device_alloc(device_offsets, kMaxRecordsPerPass * sizeof(uint64_t));
    if (e == cudaSuccess) e = pinned_alloc(host_offsets, kMaxRecordsPerPass * sizeof(uint64_t));
    if (e == cudaSuccess) {
      e = pinned_alloc(host_descs, kMaxRecordsPerPass * sizeof(daqiri_rx_desc));
    }
    if (e != cudaSuccess) return std::unexpected(cuda_failure(e, "GPU writer buffers"));
    return {};
  }
  Result<> allocate_staging() {
    if (host_buf != nullptr) return {};
    cudaError_t e = pinned_alloc(host_buf, capacity);
    if (e != cudaSuccess) return std::unexpected(cuda_failure(e, "pinned staging buffer"));
    return {};
  }

  // Tries cuFile for the first file; on any failure, host staging with the reason.
  Result<> choose_path(bool use_cufile) {
    const char* staging = "host staging (cudaMemcpy to pinned memory, write(2))";
    if (use_cufile) {
      auto api_loaded = cuda::CuFileApi::get();
      if (api_loaded) {
        cufile = *api_loaded;
        if (auto ok = open_file(0); ok) {
          data_path = cufile->nvidia_fs
                          ? "cuFile (GPUDirect Storage, nvidia-fs)"
                          : "cuFile (compatibility mode: no nvidia-fs module, libcufile copies "
                            "through host memory)";
          // Registration only speeds up GPUDirect transfers; compat mode works without it.
          buf_registered = cufile->buf_register(device_buf, capacity, 0).err == 0;
          return {};
        } else {
          data_path = std::string(staging) + "; cuFile not used: " + ok.error().message;
          (void)close_file();
          files.clear();
          cufile = nullptr;
        }
      } else {
        data_path = std::string(staging) + "; " + api_loaded.error().message;
      }
    } else {
      data_path = std::string(staging) + "; cuFile not asked for";
    }
    if (auto ok = allocate_staging(); !ok) return ok;
    return open_file(0);
  }

  // Opens file `index` (with cuFile: registers it) and writes its header.
  Result<> open_file(uint64_t index) {
    std::string name = rotating ? rotated_name(path, index) : path;
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.append ? 0 : O_TRUNC);
    // GPUDirect needs O_DIRECT; compatibility mode and staging go through the page cache.
    if (cufile != nullptr && cufile->nvidia_fs) flags |= O_DIRECT;
    auto opened = capture::open_file(options, name, flags);
    if (!opened) return std::unexpected(opened.error());
    UniqueFd f = std::move(*opened);
    uint64_t start = 0;
    if (options.append) {
      struct stat st {};
      if (::fstat(f.get(), &st) != 0) return fail_errno("capture: stat " + name);
      start = uint64_t(st.st_size);
    }
    if (cufile != nullptr) {
      cuda::CuFileApi::Descr d{};
      d.type = cuda::CuFileApi::kHandleTypeFd;
      d.handle.fd = f.get();
      if (auto st = cufile->handle_register(&handle, &d); st.err != 0) {
        handle = nullptr;
        return fail(ErrorCode::kUnavailable, cuda::describe(st, "cuFileHandleRegister " + name));
      }
    }
    fd = std::move(f);
    file_offset = start;
    file_records = 0;
    file_started = std::chrono::steady_clock::now();
    files.push_back(name);
    if (header.empty()) return {};
    cudaError_t e =
        cudaMemcpyAsync(device_buf, header.data(), header.size(), cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) return std::unexpected(cuda_failure(e, "file header to the GPU"));
    return put(header.size());
  }

  Result<> close_file() {
    if (!fd) return {};
    std::string name = files.back();
    if (handle != nullptr) {
      cufile->handle_deregister(handle);
      handle = nullptr;
    }
    UniqueFd f = std::move(fd);
    if (options.sync != Sync::kNever && ::fsync(f.get()) != 0) {
      return fail_errno("capture: fsync " + name);
    }
    if (::close(f.release()) != 0) return fail_errno("capture: close " + name);
    return {};
  }

  // device_buf[0, n) goes to the current file at its end. The stream is idle.
  Result<> put(size_t n) {
    const std::string& name = files.back();
    size_t done = 0;
    if (cufile != nullptr) {
      while (done < n) {
        ssize_t w =
            cufile->write(handle, device_buf, n - done, off_t(file_offset + done), off_t(done));
        if (w <= 0) {
          int saved = errno;
          return fail(ErrorCode::kInternal,
                      "capture: cuFileWrite " + name + ": " +
                          (w == 0 ? std::string("wrote nothing") : cuda::describe_write(w, saved)));
        }
        done += size_t(w);
      }
    } else {
      cudaError_t e = cudaMemcpyAsync(host_buf, device_buf, n, cudaMemcpyDeviceToHost, stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) return std::unexpected(cuda_failure(e, "records to the host"));
      while (done < n) {
        ssize_t w = ::pwrite(fd.get(), host_buf + done, n - done, off_t(file_offset + done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return fail_errno("capture: write " + name);
        done += size_t(w);
      }
    }
    file_offset += n;
    if (options.sync == Sync::kEveryChunk && ::fsync(fd.get()) != 0) {
      return fail_errno("capture: fsync " + name);
    }
    return {};
  }

  // Writes out what the device buffer holds.
  Result<> flush() {
    if (buffered == 0) return {};
    auto ok = put(buffered);
    buffered = 0;
    return ok;
  }

  // One pass: up to kMaxRecordsPerPass packets from `first`, as many as fit the buffer's free
  // space and the current file, packed behind what the buffer holds. Returns how many; sets
  // `rotate` when the file is full, `full` when the buffer is.
  Result<uint32_t> pass(uint32_t first, uint32_t n, bool& rotate, bool& full) {
    n = std::min(n, kMaxRecordsPerPass);
    uint32_t slot = first & view.mask;
    uint32_t head = std::min(n, view.mask + 1 - slot);
    // Raw payload records need every payload offset on the host (planned from there).
    cudaError_t e = options.format == Format::kRaw ? resolve_payload_offsets(view, first, n, stream)
                                                   : cudaSuccess;
    if (e == cudaSuccess) {
      e = cudaMemcpyAsync(host_descs, view.descs + slot, head * sizeof(daqiri_rx_desc),
                          cudaMemcpyDeviceToHost, stream);
    }
    if (e == cudaSuccess && n > head) {
      e = cudaMemcpyAsync(host_descs + head, view.descs, (n - head) * sizeof(daqiri_rx_desc),
                          cudaMemcpyDeviceToHost, stream);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) return std::unexpected(cuda_failure(e, "descriptors to the host"));
    bool too_old = options.rotate_interval.count() > 0 &&
                   std::chrono::steady_clock::now() - file_started >= options.rotate_interval;
    uint64_t used = 0;
    uint32_t k = 0;
    for (; k < n; ++k) {
      RecordData d = slot_record_data(host_descs[k], slot_size, options.format, options.snaplen);
      uint32_t record = record_size(options.format, d.length);
      if (rotating && file_records + k > 0 &&
          (too_old || (options.rotate_bytes > 0 &&
                       file_offset + buffered + used + record > options.rotate_bytes))) {
        rotate = true;
        break;
      }
      if (buffered + used + record > capacity) {
        full = true;
        break;
      }
      host_offsets[k] = buffered + used;
      used += record;
      stats.bytes += d.length;
    }
    if (k == 0) {
      if (rotate || (full && buffered > 0)) return 0;
      return fail(ErrorCode::kInternal, "capture: a record larger than the GPU writer's buffer");
    }
    e = cudaMemcpyAsync(device_offsets, host_offsets, k * sizeof(uint64_t), cudaMemcpyHostToDevice,
                        stream);
    if (e == cudaSuccess) {
      e = launch_pack_records(view, first, k, options.format, options.snaplen, device_offsets,
                              device_buf, stream);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) return std::unexpected(cuda_failure(e, "packing records"));
    buffered += used;
    file_records += k;
    stats.packets += k;
    return k;
  }

  Result<> record(Result<> r) {
    if (!r && !error) error = r.error();
    return r;
  }
};

Result<std::unique_ptr<GpuFileWriter>> GpuFileWriter::open(const std::string& path,
                                                           const GpuRxRing& ring,
                                                           const WriterOptions& options,
                                                           const GpuWriterOptions& gpu) {
  return open(path, ring.view(), ring.device(), options, gpu);
}

Result<std::unique_ptr<GpuFileWriter>> GpuFileWriter::open(const std::string& path,
                                                           const GpuRingView& ring, int device,
                                                           const WriterOptions& options,
                                                           const GpuWriterOptions& gpu) {
  if (auto ok = check_writer_options(options); !ok) return std::unexpected(ok.error());
  if (options.append && options.format == Format::kPcap) {
    return fail(ErrorCode::kInvalidArgument,
                "capture: the GPU writer appends to pcapng and raw files, not pcap");
  }
  auto api = cuda::DriverApi::get();
  if (!api) return std::unexpected(api.error());
  auto s = std::make_unique<State>();
  s->api = *api;
  s->view = ring;
  s->slot_size = ring.slot_size;
  s->path = path;
  s->options = options;
  s->rotating = rotates(options);
  s->header = file_header(options);
  s->capacity = std::max({options.chunk_bytes, kMinChunk, size_t{s->slot_size} + 64});
  CUdevice dev = 0;
  if (CUresult r = s->api->device_get(&dev, device); r != CUDA_SUCCESS) {
    return std::unexpected(cuda::driver_error(*s->api, r, "cuDeviceGet"));
  }
  auto ctx = cuda::PrimaryContext::retain(*s->api, dev);
  if (!ctx) return std::unexpected(ctx.error());
  s->ctx = std::move(*ctx);
  auto scope = cuda::ContextScope::enter(*s->api, s->ctx.get());
  if (!scope) return std::unexpected(scope.error());
  if (auto ok = s->allocate(); !ok) return std::unexpected(ok.error());
  if (auto ok = s->choose_path(gpu.use_cufile); !ok) return std::unexpected(ok.error());
  return std::unique_ptr<GpuFileWriter>(new GpuFileWriter(std::move(s)));
}

GpuFileWriter::GpuFileWriter(std::unique_ptr<State> s) : s_(std::move(s)) {}

GpuFileWriter::~GpuFileWriter() {
  (void)close();
}

Result<> GpuFileWriter::write(uint32_t first, uint32_t last) {
  State& s = *s_;
  if (s.closed) return fail(ErrorCode::kFailedPrecondition, "capture: writer closed");
  if (s.error) return std::unexpected(*s.error);
  if (last - first > s.view.mask + 1) {
    return fail(ErrorCode::kInvalidArgument, "capture: more packets than the ring holds");
  }
  auto scope = cuda::ContextScope::enter(*s.api, s.ctx.get());
  if (!scope) return std::unexpected(scope.error());
  while (first != last) {
    bool rotate = false, full = false;
    auto k = s.pass(first, last - first, rotate, full);
    if (!k) return s.record(std::unexpected(k.error()));
    first += *k;
    if (full || rotate) {
      if (auto ok = s.flush(); !ok) return s.record(ok);
    }
    if (rotate) {
      if (auto ok = s.close_file(); !ok) return s.record(ok);
      if (auto ok = s.open_file(++s.file_index); !ok) return s.record(ok);
    }
  }
  return {};
}

Result<> GpuFileWriter::close() {
  State& s = *s_;
  if (!s.closed) {
    s.closed = true;
    auto scope = cuda::ContextScope::enter(*s.api, s.ctx.get());
    (void)s.record(scope ? s.flush() : Result<>(std::unexpected(scope.error())));
    (void)s.record(s.close_file());
  }
  if (s.error) return std::unexpected(*s.error);
  return {};
}

WriterStats GpuFileWriter::stats() const {
  return s_->stats;
}

std::vector<std::string> GpuFileWriter::files() const {
  return s_->files;
}

const std::string& GpuFileWriter::data_path() const {
  return s_->data_path;
}

bool GpuFileWriter::uses_cufile() const {
  return s_->cufile != nullptr;
}

}  // namespace daqiri::capture

/* cal_device: device strings and device discovery for the calibration.
 *
 * A device string is "cpu", "cuda:I" (GPU I) or "cuda:I/sm=N" (a green-context partition of N
 * SMs of GPU I), as nn_net.h takes. Discovery fills the columns of the device table: for the
 * cpu, the model name from /proc/cpuinfo, the online cores (stored in sm_count: the cpu's
 * processing units), the physical memory, OpenBLAS's version and configuration
 * (openblas_get_config) and the host name; for a GPU, through the CUDA driver opened at run
 * time (nn/nn_cudalib.h): name, UUID, SMs, memory, compute capability, clocks and the driver,
 * cuDNN and NCCL versions.
 * Contract: no allocation; strings are copied into the struct. A GPU device on a machine or
 * build without CUDA is HS_EUNSUPPORTED with a message that says which. */
#ifndef HS_CAL_DEVICE_H
#define HS_CAL_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"

typedef struct hs_cal_device {
  char spec[64];               /* the device string as given, e.g. "cuda:0/sm=32" */
  char kind[8];                /* "cpu" | "cuda" */
  char name[256];              /* device.name: CPU or GPU model name (or --name) */
  int ordinal;                 /* cuda: GPU index; -1 for the cpu */
  int sm_partition;            /* SMs of the partition; 0 = whole device. Parsed: as asked;
                                  discovered: as the driver grants them (rounded up to whole
                                  groups), the count the name gives */
  int sm_requested;            /* discovered partition: the SMs asked for; else 0 */
  int sm_count;                /* GPU SMs, or the cpu's online cores; 0 = unknown */
  int sm_grouped;              /* GPU: the SMs in whole groups of the driver's granule, what
                                  partitions can be granted together (132 -> 128 in groups of
                                  8); 0 = unknown (a driver without green contexts) */
  int64_t memory_bytes;        /* bytes; 0 = unknown */
  char uuid[64];               /* GPU UUID; empty for the cpu */
  char compute_capability[16]; /* "9.0"; empty for the cpu */
  int clock_sm_mhz, clock_mem_mhz; /* MHz; 0 = unknown */
  char driver_version[32], cuda_version[32], cudnn_version[32], nccl_version[32];
  char blas[256];              /* cpu: OpenBLAS version and configuration */
  char host[256];
  int threads;                 /* cpu: threads per net used for the timings (1 = default) */
} hs_cal_device;

/* For a discovered partition the driver rounded up (sm_requested != sm_partition): a line for
 * the user, "cuda:0/sm=10: the driver grants whole groups of SMs: the partition has 16 (named
 * \"NAME (16 SMs)\")", in buf; NULL otherwise. */
const char *hs_cal_device_granted_note(const hs_cal_device *dev, char *buf, size_t len);

/* Parses a device string into spec, kind, ordinal and sm_partition; HS_EINVAL with a message
 * like `expected cpu, cuda:I or cuda:I/sm=N, got "gpu0"`; the caller says where the string came
 * from (`--device: `, a cluster file's position). */
int hs_cal_device_parse(const char *s, hs_cal_device *out, hs_diag *d);
/* Fills the rest of *dev (after hs_cal_device_parse) from the machine. */
int hs_cal_device_discover(hs_cal_device *dev, hs_diag *d);

/* The device name of a calibration taken while n workers stepped at once on device `name`
 * ("NAME (N workers)", cut to a device name's 255 characters): how `hetsim calib --concurrent
 * N` and `hetsim calib import` of a profile of N concurrent workers store it, and what
 * `hetsim validate` looks up for a run of N workers. Returns buf. */
char *hs_cal_device_shared_name(char *buf, size_t len, const char *name, int n);

#endif

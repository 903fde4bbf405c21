package main

// The HAMi-core shared region a claim's first CUDA process creates (libvgpu.so's cuInit, at
// HAMi-core 8c32de6, the commit driver v0.1.0 pins), written here at prepare in its documented
// layout (../shared/NODE-MONITOR.md, section 2) so that the node monitor has a region to read
// on a node without a GPU: the header with the claim's cards, limits and feedback fields, no
// process slot yet (a test's pod plays the CUDA process and fills its own slot).

import (
	"encoding/binary"
	"os"
	"strconv"
)

const (
	regionSize  = 2008952 // sizeof(shared_region_t); the file is one byte longer
	regionMagic = 19920718
	uuidsAt     = 64
	uuidSize    = 96
	limitAt     = 1600
	smLimitAt   = 1728
	switchAt    = 2008900
)

type regionHeader struct {
	uuids    []string
	limits   []uint64 // bytes
	smLimits []uint64 // percent
}

func (r *regionHeader) add(uuid, memoryMiB, cores string) {
	mib, _ := strconv.ParseUint(memoryMiB, 10, 64)
	sm, _ := strconv.ParseUint(cores, 10, 64)
	if sm == 0 {
		sm = 100 // libvgpu.so stores a 0 SM limit as 100
	}
	r.uuids = append(r.uuids, uuid)
	r.limits = append(r.limits, mib*mebibyte)
	r.smLimits = append(r.smLimits, sm)
}

func (r *regionHeader) write(path string) error {
	head := make([]byte, 1856)
	le := binary.LittleEndian
	le.PutUint32(head[0:], regionMagic)
	le.PutUint32(head[4:], 1)
	le.PutUint32(head[8:], 2)
	le.PutUint32(head[24:], 1) // sem: value 1, free
	le.PutUint64(head[56:], uint64(len(r.uuids)))
	for i := 0; i < 16; i++ {
		sm := uint64(100)
		if i < len(r.uuids) {
			copy(head[uuidsAt+uuidSize*i:], r.uuids[i])
			le.PutUint64(head[limitAt+8*i:], r.limits[i])
			sm = r.smLimits[i]
		}
		le.PutUint64(head[smLimitAt+8*i:], sm)
	}
	tail := make([]byte, 12)
	le.PutUint32(tail[0:], 1) // utilization_switch
	le.PutUint32(tail[4:], 2) // recent_kernel
	le.PutUint32(tail[8:], 1) // priority (CUDA_TASK_PRIORITY unset)
	file, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := file.Chmod(0o666); err != nil { // as libvgpu.so makes it, after umask(0)
		return err
	}
	if _, err := file.WriteAt(head, 0); err != nil {
		return err
	}
	if _, err := file.WriteAt(tail, switchAt); err != nil {
		return err
	}
	_, err = file.WriteAt([]byte{0}, regionSize) // sized by one zero byte past the struct
	return err
}

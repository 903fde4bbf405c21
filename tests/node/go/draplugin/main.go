// Command hami-kubelet-plugin is a STAND-IN for the HAMi DRA driver v0.1.0's kubelet plugin
// (docker.io/projecthami/k8s-dra-driver:v0.1.0), for the real node of tests/node. The real
// driver needs NVIDIA hardware (NVML) and its image cannot be pulled here.
//
// What it copies from v0.1.0 (docs/kubernetes-facts.md: the driver; its HAMiGpuInfo.GetDevice
// and HAMiCoreManager.GetCDIContainerEdits):
//   - the ResourceSlice: driver hami-core-gpu.project-hami.io, one pool named after the node,
//     devices hami-gpu-<minor> with every attribute v0.1.0 publishes (type, uuid, minor,
//     productName, brand, architecture, cudaComputeCapability, driverVersion, cudaDriverVersion,
//     pcieBusID, resource.kubernetes.io/pcieRoot), `cores` (100; default 100, 0..100 step 1)
//     and `memory` (the card's bytes; default all, 1Mi..all step 1Mi) capacity, and
//     allowMultipleAllocations;
//   - at prepare, a CDI spec per claim whose container edits are v0.1.0's:
//     CUDA_DEVICE_MEMORY_LIMIT_<i>=<consumed MiB>m and CUDA_DEVICE_SM_LIMIT_<i>=<consumed cores>
//     per device of the claim (60 and the whole card without consumed capacity), <i> counting
//     the claim's devices, CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/claims/<claim UID>/
//     <random uuid>.cache, and the mounts of that directory, /usr/local/vgpu/libvgpu.so,
//     /etc/ld.so.preload (from /usr/local/vgpu/ld.so.preload) and /tmp/vgpulock; at unprepare
//     the spec and the claim's directory are removed;
//   - the gRPC health service the chart's probes call (service "liveness"), SERVING only while
//     the plugin's kubelet registration socket and DRA socket answer.
//
// What it cannot show: anything HAMi-core does inside CUDA. libvgpu.so and ld.so.preload are
// harmless stand-in files (vgpu-init.sh installs them as the real image's does), no device node
// is handed over, and no limit is enforced. Where the real driver's NVIDIA CDI edits hand the
// GPUs' device nodes to the container, this one sets NVIDIA_VISIBLE_DEVICES to the sorted UUIDs
// of the claim's devices, so a test can see which cards a container got.
//
// It refuses to prepare a claim whose config carries opaque parameters for this driver (v0.1.0
// defines none it would accept from this project's templates): that is the failure path the node
// tests exercise.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"
)

const (
	driverName   = "hami-core-gpu.project-hami.io"
	cdiVendor    = "k8s." + driverName
	cdiClass     = "claim"
	hostHookPath = "/usr/local/vgpu"
	mebibyte     = 1024 * 1024
)

// gpu is one card the stand-in publishes.
type gpu struct {
	Minor        int    `json:"minor"`
	UUID         string `json:"uuid"`
	Product      string `json:"productName"`
	MemoryGiB    int64  `json:"memoryGiB"`
	Architecture string `json:"architecture"`
	Compute      string `json:"cudaComputeCapability"`
}

// The default inventory: the cards of tests/controlplane/gpu_node.py's GpuNode.default().
var defaultGPUs = []gpu{
	{0, "GPU-1c000000-0000-4000-8000-000000000000", "NVIDIA L4", 24, "Ada Lovelace", "8.9.0"},
	{1, "GPU-1c000001-0000-4000-8000-000000000001", "NVIDIA L4", 24, "Ada Lovelace", "8.9.0"},
	{2, "GPU-a1000002-0000-4000-8000-000000000002", "NVIDIA A100-SXM4-80GB", 80, "Ampere", "8.0.0"},
}

func (g gpu) name() string { return fmt.Sprintf("hami-gpu-%d", g.Minor) }

func (g gpu) bytes() int64 { return g.MemoryGiB * 1024 * mebibyte }

func (g gpu) device() resourceapi.Device {
	memory := resource.NewQuantity(g.bytes(), resource.BinarySI)
	str := func(value string) resourceapi.DeviceAttribute {
		return resourceapi.DeviceAttribute{StringValue: ptr.To(value)}
	}
	version := func(value string) resourceapi.DeviceAttribute {
		return resourceapi.DeviceAttribute{VersionValue: ptr.To(value)}
	}
	return resourceapi.Device{
		Name: g.name(),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type":                            str("hami-gpu"),
			"uuid":                            str(g.UUID),
			"minor":                           {IntValue: ptr.To(int64(g.Minor))},
			"productName":                     str(g.Product),
			"brand":                           str("Nvidia"),
			"architecture":                    str(g.Architecture),
			"cudaComputeCapability":           version(g.Compute),
			"driverVersion":                   version("570.124.6"),
			"cudaDriverVersion":               version("12.8.0"),
			"pcieBusID":                       str(fmt.Sprintf("0000:%02x:00.0", g.Minor+1)),
			"resource.kubernetes.io/pcieRoot": str("pci0000:00"),
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"cores": {
				Value: *resource.NewQuantity(100, resource.DecimalSI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default: resource.NewQuantity(100, resource.DecimalSI),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{
						Min:  resource.NewQuantity(0, resource.DecimalSI),
						Max:  resource.NewQuantity(100, resource.DecimalSI),
						Step: resource.NewQuantity(1, resource.DecimalSI),
					},
				},
			},
			"memory": {
				Value: *memory,
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default: memory,
					ValidRange: &resourceapi.CapacityRequestPolicyRange{
						Min:  resource.NewQuantity(mebibyte, resource.BinarySI),
						Max:  memory,
						Step: resource.NewQuantity(mebibyte, resource.BinarySI),
					},
				},
			},
		},
		AllowMultipleAllocations: ptr.To(true),
	}
}

// cdiSpec is the part of the CDI spec format (v0.6.0) the stand-in writes.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name  string   `json:"name"`
	Edits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env    []string   `json:"env"`
	Mounts []cdiMount `json:"mounts"`
}

type cdiMount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Options       []string `json:"options"`
}

type plugin struct {
	cdiRoot string
	gpus    map[string]gpu
	mutex   sync.Mutex
	// prepared: what each prepared claim got, so that a repeated prepare (a kubelet restart)
	// answers the same and an unprepare after a restart of this plugin still finds the files.
	prepared map[types.UID][]kubeletplugin.Device
}

func (p *plugin) specPath(uid types.UID) string {
	return filepath.Join(p.cdiRoot, fmt.Sprintf("%s-%s.json", cdiVendor, uid))
}

func (p *plugin) PrepareResourceClaims(
	ctx context.Context, claims []*resourceapi.ResourceClaim,
) (map[types.UID]kubeletplugin.PrepareResult, error) {
	p.mutex.Lock()
	defer p.mutex.Unlock()
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		if devices, done := p.prepared[claim.UID]; done {
			result[claim.UID] = kubeletplugin.PrepareResult{Devices: devices}
			continue
		}
		devices, err := p.prepare(claim)
		if err != nil {
			klog.FromContext(ctx).Error(err, "prepare refused", "claim", klog.KObj(claim))
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		p.prepared[claim.UID] = devices
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devices}
	}
	return result, nil
}

func (p *plugin) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	for _, config := range claim.Status.Allocation.Devices.Config {
		if config.Opaque != nil && config.Opaque.Driver == driverName {
			return nil, fmt.Errorf(
				"claim %s/%s: opaque config for %s is not supported by this driver: %s",
				claim.Namespace, claim.Name, driverName, string(config.Opaque.Parameters.Raw))
		}
	}
	claimDir := fmt.Sprintf("%s/claims/%s", hostHookPath, claim.UID)
	if err := os.RemoveAll(claimDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(claimDir, 0o777); err != nil {
		return nil, err
	}
	if err := os.Chmod(claimDir, 0o777); err != nil {
		return nil, err
	}
	regionPath := fmt.Sprintf("%s/%s.cache", claimDir, newUUID())
	env := []string{"CUDA_DEVICE_MEMORY_SHARED_CACHE=" + regionPath}
	var devices []kubeletplugin.Device
	var uuids []string
	var region regionHeader
	index := 0
	cdiID := fmt.Sprintf("%s/%s=%s", cdiVendor, cdiClass, claim.UID)
	for _, allocated := range claim.Status.Allocation.Devices.Results {
		if allocated.Driver != driverName {
			continue
		}
		card, known := p.gpus[allocated.Device]
		if !known {
			return nil, fmt.Errorf("claim %s/%s: device %q is not on this node",
				claim.Namespace, claim.Name, allocated.Device)
		}
		cores, memoryMiB := "60", strconv.FormatInt(card.bytes()/mebibyte, 10)
		if consumed, ok := allocated.ConsumedCapacity["cores"]; ok {
			if value, exact := consumed.AsInt64(); exact {
				cores = strconv.FormatInt(value, 10)
			}
		}
		if consumed, ok := allocated.ConsumedCapacity["memory"]; ok {
			if value, exact := consumed.AsInt64(); exact {
				memoryMiB = strconv.FormatInt(value/mebibyte, 10)
			}
		}
		env = append(env,
			fmt.Sprintf("CUDA_DEVICE_SM_LIMIT_%d=%s", index, cores),
			fmt.Sprintf("CUDA_DEVICE_MEMORY_LIMIT_%d=%sm", index, memoryMiB))
		index++
		uuids = append(uuids, card.UUID)
		region.add(card.UUID, memoryMiB, cores)
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{allocated.Request},
			PoolName:     allocated.Pool,
			DeviceName:   allocated.Device,
			ShareID:      allocated.ShareID,
			CDIDeviceIDs: []string{cdiID},
		})
	}
	if err := region.write(regionPath); err != nil {
		return nil, fmt.Errorf("claim %s/%s: the HAMi-core region: %w", claim.Namespace, claim.Name, err)
	}
	slices.Sort(uuids)
	env = append(env, "NVIDIA_VISIBLE_DEVICES="+strings.Join(uuids, ","))
	spec := cdiSpec{
		Version: "0.6.0",
		Kind:    cdiVendor + "/" + cdiClass,
		Devices: []cdiDevice{{
			Name: string(claim.UID),
			Edits: cdiEdits{
				Env: env,
				Mounts: []cdiMount{
					{claimDir, claimDir, []string{"rw", "nosuid", "nodev", "bind"}},
					{hostHookPath + "/libvgpu.so", hostHookPath + "/libvgpu.so", []string{"ro", "nosuid", "nodev", "bind"}},
					{hostHookPath + "/ld.so.preload", "/etc/ld.so.preload", []string{"ro", "nosuid", "nodev", "bind"}},
					{"/tmp/vgpulock", "/tmp/vgpulock", []string{"rw", "nosuid", "nodev", "bind"}},
				},
			},
		}},
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	path := p.specPath(claim.UID)
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return nil, err
	}
	return devices, os.Rename(path+".tmp", path)
}

func (p *plugin) UnprepareResourceClaims(
	_ context.Context, claims []kubeletplugin.NamespacedObject,
) (map[types.UID]error, error) {
	p.mutex.Lock()
	defer p.mutex.Unlock()
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := os.Remove(p.specPath(claim.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if removeErr := os.RemoveAll(fmt.Sprintf("%s/claims/%s", hostHookPath, claim.UID)); err == nil {
			err = removeErr
		}
		delete(p.prepared, claim.UID)
		result[claim.UID] = err
	}
	return result, nil
}

func (p *plugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
}

// health answers the chart's gRPC probes: SERVING only when both sockets answer.
type health struct {
	healthpb.UnimplementedHealthServer
	registrar string
	dra       string
}

func (h *health) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.Service != "" && req.Service != "liveness" {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", req.Service)
	}
	answer := &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	registration, err := grpc.NewClient("unix://"+h.registrar, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return answer, nil
	}
	defer registration.Close()
	info, err := registerapi.NewRegistrationClient(registration).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil || info.Name != driverName {
		klog.ErrorS(err, "health: the registration socket does not answer", "socket", h.registrar)
		return answer, nil
	}
	dra, err := grpc.NewClient("unix://"+h.dra, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return answer, nil
	}
	defer dra.Close()
	if _, err := drapb.NewDRAPluginClient(dra).NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{}); err != nil {
		klog.ErrorS(err, "health: the DRA socket does not answer", "socket", h.dra)
		return answer, nil
	}
	answer.Status = healthpb.HealthCheckResponse_SERVING
	return answer, nil
}

func newUUID() string {
	raw := rand.String(32)
	return fmt.Sprintf("%s-%s-%s-%s-%s", raw[0:8], raw[8:12], raw[12:16], raw[16:20], raw[20:32])
}

func env(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(); err != nil {
		klog.ErrorS(err, "hami-kubelet-plugin (stand-in) failed")
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	nodeName := os.Getenv("NODE_NAME")
	if nodeName == "" {
		return errors.New("NODE_NAME is not set")
	}
	registrarDir := env("KUBELET_REGISTRAR_DIRECTORY_PATH", kubeletplugin.KubeletRegistryDir)
	pluginDir := filepath.Join(env("KUBELET_PLUGINS_DIRECTORY_PATH", "/var/lib/kubelet/plugins"), driverName)
	p := &plugin{
		cdiRoot:  env("CDI_ROOT", "/var/run/cdi"),
		gpus:     map[string]gpu{},
		prepared: map[types.UID][]kubeletplugin.Device{},
	}
	var devices []resourceapi.Device
	for _, card := range defaultGPUs {
		p.gpus[card.name()] = card
		devices = append(devices, card.device())
	}
	for _, dir := range []string{p.cdiRoot, pluginDir, hostHookPath + "/claims"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	config, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster config: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	helper, err := kubeletplugin.Start(ctx, p,
		kubeletplugin.DriverName(driverName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(nodeName),
		kubeletplugin.RegistrarDirectoryPath(registrarDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
	)
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{
			nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
		},
	}); err != nil {
		return fmt.Errorf("publish the ResourceSlice: %w", err)
	}
	if port := os.Getenv("HEALTHCHECK_PORT"); port != "" {
		listener, err := net.Listen("tcp", ":"+port)
		if err != nil {
			return fmt.Errorf("health port: %w", err)
		}
		server := grpc.NewServer()
		healthpb.RegisterHealthServer(server, &health{
			registrar: filepath.Join(registrarDir, driverName+"-reg.sock"),
			dra:       filepath.Join(pluginDir, "dra.sock"),
		})
		go func() { _ = server.Serve(listener) }()
		defer server.Stop()
	}
	klog.InfoS("hami-kubelet-plugin (stand-in) serving", "node", nodeName, "devices", len(devices))
	<-ctx.Done()
	return nil
}

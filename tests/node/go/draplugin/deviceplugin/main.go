// Command hami-device-plugin is a STAND-IN for legacy HAMi's NVIDIA device plugin
// (projecthami/hami's `nvidia-device-plugin` container of the hami-device-plugin DaemonSet),
// for the staged-migration tests of tests/node: the legacy pool's node side. The real plugin
// needs NVIDIA hardware (NVML) and its image cannot be pulled here.
//
// What it copies: the kubelet's device-plugin API v1beta1 as HAMi's plugin uses it. It
// registers on the kubelet's socket (/var/lib/kubelet/device-plugins/kubelet.sock) for
// `nvidia.com/gpu` and advertises deviceSplitCount virtual devices per card (HAMi's default
// split is 10), named `<card UUID>-<i>` as HAMi names them, all Healthy; it registers again
// when the kubelet's socket is re-created (a kubelet restart), and stops advertising when it
// ends (the kubelet then marks the resource unhealthy: allocatable 0).
//
// What it cannot show: HAMi's per-card fit and HAMi-core's limits. The real Allocate reads the
// devices hami-scheduler chose from the pod's annotations and injects
// CUDA_DEVICE_MEMORY_LIMIT_<i>, CUDA_DEVICE_SM_LIMIT and libvgpu.so; this one only sets
// NVIDIA_VISIBLE_DEVICES to the sorted UUIDs of the cards behind the virtual devices the
// kubelet gave, and HAMI_LEGACY_STAND_IN=1, so a test can see that a container was served by
// the legacy pool.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const resourceName = "nvidia.com/gpu"

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	cardOf  map[string]string // virtual device ID -> card UUID
}

func newPlugin(node string, cards, split int) *plugin {
	p := &plugin{cardOf: map[string]string{}}
	for card := 0; card < cards; card++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", node, card)))
		uuid := fmt.Sprintf("GPU-%x-%x-4%x-8%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
		for i := 0; i < split; i++ {
			id := fmt.Sprintf("%s-%d", uuid, i)
			p.devices = append(p.devices, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
			p.cardOf[id] = uuid
		}
	}
	return p
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		var cards []string
		for _, id := range container.DevicesIds {
			card, ok := p.cardOf[id]
			if !ok {
				return nil, fmt.Errorf("unknown device %q", id)
			}
			if !slices.Contains(cards, card) {
				cards = append(cards, card)
			}
		}
		slices.Sort(cards)
		response.ContainerResponses = append(response.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{
				"NVIDIA_VISIBLE_DEVICES": strings.Join(cards, ","),
				"HAMI_LEGACY_STAND_IN":   "1",
			},
		})
	}
	return response, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func register(ctx context.Context, endpoint string) error {
	conn, err := grpc.NewClient("unix://"+pluginapi.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     endpoint,
		ResourceName: resourceName,
	})
	return err
}

func inode(path string) uint64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if stat, ok := info.Sys().(*syscall.Stat_t); ok {
		return stat.Ino
	}
	return 0
}

func run() error {
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "the node (names the cards' UUIDs)")
	cards := flag.Int("cards", 2, "cards on the node")
	split := flag.Int("device-split-count", 10, "virtual devices per card (HAMi's deviceSplitCount)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	endpoint := "hami-nvidia.sock"
	socket := filepath.Join(pluginapi.DevicePluginPath, endpoint)
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, newPlugin(*node, *cards, *split))
	go func() { _ = server.Serve(listener) }()
	defer func() {
		server.Stop()
		_ = os.Remove(socket)
	}()

	registered := uint64(0)
	for {
		if now := inode(pluginapi.KubeletSocket); now != 0 && now != registered {
			if err := register(ctx, endpoint); err != nil {
				fmt.Fprintf(os.Stderr, "register with the kubelet: %v\n", err)
			} else {
				registered = now
				fmt.Printf("registered %s: %d cards x %d\n", resourceName, *cards, *split)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

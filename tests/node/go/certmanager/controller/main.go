// Command cert-manager-controller runs cert-manager v1.21's own certificate controllers, for the
// certificates.mode=certManager tests of tests/node.
//
// Why a command of our own: cert-manager publishes its binaries as separate Go modules
// (github.com/cert-manager/cert-manager/controller-binary, cainjector-binary) that the Go module
// proxy does not serve, and its images cannot be pulled here. The module it does serve,
// github.com/cert-manager/cert-manager, holds every controller, issuer and the context they run
// in; this command is the thin wiring around them, written here: it builds cert-manager's
// controller context (controller.NewContextFactory), takes leader election on a Lease as the
// real controller does (cert-manager-controller in --leader-election-namespace), answers /livez
// on :9403 with cert-manager's healthz server (the chart's liveness probe) and serves metrics on
// :9402, then runs the registered controllers.
//
// What it runs: the issuers and clusterissuers controllers, the six certificates-* controllers
// (trigger, key-manager, request-manager, readiness, revision-manager, issuing), the
// CertificateRequest approver and the selfSigned and CA signers: everything a Certificate from a
// self-signed or CA Issuer goes through. Not built in: ACME, Vault, Venafi, the ingress and
// Gateway shims, CertificateSigningRequest signers (the tests use none), and the controller's
// config file. It accepts the flags cert-manager's chart passes by default and refuses others.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

type options struct {
	kubeconfig               string
	clusterResourceNamespace string
	leaderElect              bool
	leaseNamespace           string
	leaseDuration            time.Duration
	renewDeadline            time.Duration
	retryPeriod              time.Duration
	workers                  int
	ownerRef                 bool
}

func parse(arguments []string) (options, error) {
	var o options
	flags := flag.NewFlagSet("cert-manager-controller", flag.ContinueOnError)
	verbosity := flags.Int("v", 2, "klog verbosity")
	flags.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster")
	flags.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "kube-system",
		"namespace of the Secrets of ClusterIssuers")
	flags.BoolVar(&o.leaderElect, "leader-elect", true, "take leader election before running")
	flags.StringVar(&o.leaseNamespace, "leader-election-namespace", "kube-system", "the Lease's namespace")
	flags.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 60*time.Second, "")
	flags.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 40*time.Second, "")
	flags.DurationVar(&o.retryPeriod, "leader-election-retry-period", 15*time.Second, "")
	flags.IntVar(&o.workers, "concurrent-workers", 5, "workers per controller")
	flags.BoolVar(&o.ownerRef, "enable-certificate-owner-ref", false, "Certificates own their Secrets")
	// Passed by the chart's defaults; ACME is not built in, so they are accepted and unused.
	flags.String("acme-http01-solver-image", "", "unused: no ACME issuer in this build")
	flags.Int("max-concurrent-challenges", 60, "unused: no ACME issuer in this build")
	if err := flags.Parse(arguments); err != nil {
		return o, err
	}
	if flags.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", flags.Args())
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	return o, klogFlags.Set("v", strconv.Itoa(*verbosity))
}

func listen(ctx context.Context, address string) (net.Listener, error) {
	var config net.ListenConfig
	return config.Listen(ctx, "tcp", address)
}

func run(ctx context.Context, o options) error {
	log := logf.FromContext(ctx)
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         o.kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: o.clusterResourceNamespace},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           o.ownerRef,
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	group, ctx := errgroup.WithContext(ctx)

	metricsListener, err := listen(ctx, ":9402")
	if err != nil {
		return err
	}
	metricsServer := base.Metrics.NewServer(metricsListener)
	group.Go(func() error {
		if err := metricsServer.Serve(metricsListener); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	group.Go(func() error {
		<-ctx.Done()
		return metricsServer.Close()
	})
	healthListener, err := listen(ctx, ":9403")
	if err != nil {
		return err
	}
	health := healthz.NewServer(20 * time.Second)
	group.Go(func() error { return health.Start(ctx, healthListener) })

	elected := make(chan struct{})
	if o.leaderElect {
		identity, err := os.Hostname()
		if err != nil {
			return err
		}
		election, err := factory.Build("leader-election")
		if err != nil {
			return err
		}
		lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaseNamespace,
			"cert-manager-controller", election.Client.CoreV1(), election.Client.CoordinationV1(),
			resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: election.Recorder})
		if err != nil {
			return err
		}
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline,
			RetryPeriod: o.retryPeriod, ReleaseOnCancel: true, WatchDog: health.LeaderHealthzAdaptor,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(elected) },
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return err
		}
		group.Go(func() error {
			elector.Run(ctx)
			if ctx.Err() == nil {
				return errors.New("leader election lost")
			}
			return nil
		})
	} else {
		close(elected)
	}
	select {
	case <-ctx.Done():
		return group.Wait()
	case <-elected:
	}

	names := make([]string, 0, len(controller.Known()))
	for name := range controller.Known() {
		names = append(names, name)
	}
	sort.Strings(names)
	log.Info("starting controllers", "controllers", names)
	for _, name := range names {
		loop, err := controller.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		group.Go(func() error { return loop.Run(o.workers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	return group.Wait()
}

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(64)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = logf.NewContext(ctx, klog.Background(), "cert-manager-controller")
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

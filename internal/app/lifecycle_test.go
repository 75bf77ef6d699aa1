package app

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// recorder makes components that record their starts and stops.
type recorder struct{ events []string }

func (r *recorder) component(name string, startErr, stopErr error) Component {
	return Component{
		Name: name,
		Start: func(context.Context) error {
			r.events = append(r.events, "start "+name)
			return startErr
		},
		Stop: func(context.Context) error {
			r.events = append(r.events, "stop "+name)
			return stopErr
		},
	}
}

func background() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func TestStartAllStopsInReverse(t *testing.T) {
	var r recorder
	cs := []Component{r.component("a", nil, nil), {Name: "nothing to stop", Start: func(context.Context) error { return nil }}, r.component("c", nil, nil)}
	started, err := startAll(context.Background(), zap.NewNop(), cs, background)
	if err != nil {
		t.Fatal(err)
	}
	if err := stopAll(context.Background(), zap.NewNop(), started); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start a", "start c", "stop c", "stop a"}; !slices.Equal(r.events, want) {
		t.Fatalf("events %q, want %q", r.events, want)
	}
}

func TestStartAllFailureStopsThoseStarted(t *testing.T) {
	var r recorder
	boom := errors.New("address in use")
	cs := []Component{r.component("a", nil, nil), r.component("b", nil, nil), r.component("c", boom, nil), r.component("d", nil, nil)}
	started, err := startAll(context.Background(), zap.NewNop(), cs, background)
	if !errors.Is(err, boom) || err.Error() != "c: address in use" || started != nil {
		t.Fatalf("startAll = %v, %v; want the error of c, named", started, err)
	}
	// c failed to start: it is not stopped; d never started.
	if want := []string{"start a", "start b", "start c", "stop b", "stop a"}; !slices.Equal(r.events, want) {
		t.Fatalf("events %q, want %q", r.events, want)
	}
}

func TestStopAllStopsEveryComponentWhenOneFails(t *testing.T) {
	var r recorder
	cs := []Component{r.component("a", nil, nil), r.component("b", nil, errors.New("flush failed")), r.component("c", nil, nil)}
	err := stopAll(context.Background(), zap.NewNop(), cs)
	if err == nil || !strings.Contains(err.Error(), "b: flush failed") {
		t.Fatalf("stopAll = %v, want b's error named", err)
	}
	if want := []string{"stop c", "stop b", "stop a"}; !slices.Equal(r.events, want) {
		t.Fatalf("events %q, want %q", r.events, want)
	}
}

func TestWorkerStopsItsLoop(t *testing.T) {
	var w worker
	ctx, cancel := context.WithCancel(context.Background())
	ended := false
	w.start(ctx, func(ctx context.Context) {
		<-ctx.Done()
		ended = true
	})
	cancel() // the start context ending does not stop the worker: its stop does
	if err := w.stop(context.Background()); err != nil || !ended {
		t.Fatalf("stop = %v, loop ended %v", err, ended)
	}
	var never worker
	if err := never.stop(context.Background()); err != nil {
		t.Fatalf("stop of a worker never started = %v", err)
	}
}

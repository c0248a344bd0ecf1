package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdev/svc/internal/admission"
)

// AdmissionStats are the admission gates' states, by catalog model (handlers/edge): the models with
// maxConcurrency only.
type AdmissionStats interface {
	AdmissionStates() map[string]admission.Stats
}

var (
	admissionDepth = prometheus.NewDesc("svc_admission_queue_depth",
		"Calls waiting at this edge for their model's turn, by catalog model and lane (interactive, shadow, eval).", []string{"model", "lane"}, nil)
	admissionInFlight = prometheus.NewDesc("svc_admission_in_flight",
		"Calls this edge has admitted to the model and not yet ended.", []string{"model"}, nil)
	admissionCapacity = prometheus.NewDesc("svc_admission_capacity",
		"Calls this edge admits to the model at once: maxConcurrency times its healthy replicas, divided by --edge-count (0: no bound, no replica healthy).", []string{"model"}, nil)
)

// WatchAdmission exports the gates' queues, read when scraped: svc_admission_queue_depth by model and
// lane, svc_admission_in_flight and svc_admission_capacity by model (an autoscaler's saturation signal is
// depth over capacity). A second call (another edge handler on the same registry) is a no-op.
func (m *Metrics) WatchAdmission(s AdmissionStats) {
	if m == nil {
		return
	}
	m.admissionOnce.Do(func() {
		m.admissionWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "svc_admission_wait_seconds",
			Help:    "Time an admitted or refused call waited for its model's turn, by catalog model and lane (0 when it went at once).",
			Buckets: []float64{.001, .005, .025, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"model", "lane"})
		m.admissionRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_admission_refused_total",
			Help: "Calls refused with 429 model_busy: they waited their queue timeout, or the queue was full and their key held its share of it."}, []string{"model", "lane"})
		m.reg.MustRegister(m.admissionWait, m.admissionRefused, &admissionCollector{s: s})
	})
}

type admissionCollector struct{ s AdmissionStats }

func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- admissionDepth
	ch <- admissionInFlight
	ch <- admissionCapacity
}

func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	for model, s := range c.s.AdmissionStates() {
		for l := range admission.NumLanes {
			ch <- prometheus.MustNewConstMetric(admissionDepth, prometheus.GaugeValue, float64(s.Waiting[l]), model, l.String())
		}
		ch <- prometheus.MustNewConstMetric(admissionInFlight, prometheus.GaugeValue, float64(s.InFlight), model)
		ch <- prometheus.MustNewConstMetric(admissionCapacity, prometheus.GaugeValue, float64(s.Capacity), model)
	}
}

// AdmissionSeries are one model's wait and refusal series, resolved once (when its gate is made) so
// that the call path only observes.
type AdmissionSeries struct {
	wait    [admission.NumLanes]prometheus.Observer
	refused [admission.NumLanes]prometheus.Counter
}

// Admission returns the series of a model's gate; nil (which observes nothing) without metrics or
// before WatchAdmission.
func (m *Metrics) Admission(model string) *AdmissionSeries {
	if m == nil || m.admissionWait == nil {
		return nil
	}
	s := &AdmissionSeries{}
	for l := range admission.NumLanes {
		s.wait[l] = m.admissionWait.WithLabelValues(model, l.String())
		s.refused[l] = m.admissionRefused.WithLabelValues(model, l.String())
	}
	return s
}

// Waited observes a call's wait for its turn.
func (s *AdmissionSeries) Waited(l admission.Lane, d time.Duration) {
	if s != nil && l < admission.NumLanes {
		s.wait[l].Observe(d.Seconds())
	}
}

// Refused counts a call refused with model_busy.
func (s *AdmissionSeries) Refused(l admission.Lane) {
	if s != nil && l < admission.NumLanes {
		s.refused[l].Inc()
	}
}

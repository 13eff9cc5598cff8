//! The metric catalogue: each crate that records metrics lists them once as [`Metric`]s
//! (name, kind, help) in its own `metrics` module, next to the constants its call sites use.
//! The list is what the Prometheus recorder is told about ([`describe`]) and what the
//! dashboard check reads (every name `deploy/grafana/cairn.json` queries is in some crate's
//! list). Names follow `cairn_<area>_<thing>_<unit>`: counters end in `_total`, durations
//! in `_seconds`.

/// What kind of metric a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows; the name ends in `_total`.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Observations in buckets (`_bucket`, `_sum`, `_count` series); durations in seconds.
    Histogram,
}

/// One metric a crate records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

impl Metric {
    pub const fn counter(name: &'static str, help: &'static str) -> Self {
        Metric {
            name,
            kind: Kind::Counter,
            help,
        }
    }

    pub const fn gauge(name: &'static str, help: &'static str) -> Self {
        Metric {
            name,
            kind: Kind::Gauge,
            help,
        }
    }

    pub const fn histogram(name: &'static str, help: &'static str) -> Self {
        Metric {
            name,
            kind: Kind::Histogram,
            help,
        }
    }

    /// The series names Prometheus exposes for it (a histogram's `_bucket`, `_sum` and
    /// `_count`; the name itself otherwise).
    pub fn series(&self) -> Vec<String> {
        match self.kind {
            Kind::Counter | Kind::Gauge => vec![self.name.to_owned()],
            Kind::Histogram => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|s| format!("{}{s}", self.name))
                .collect(),
        }
    }
}

/// Tells the installed recorder the help text of each metric (nothing happens without one;
/// call it after the recorder is installed).
pub fn describe(metrics: &[Metric]) {
    for m in metrics {
        match m.kind {
            Kind::Counter => metrics::describe_counter!(m.name, m.help),
            Kind::Gauge => metrics::describe_gauge!(m.name, m.help),
            Kind::Histogram => metrics::describe_histogram!(m.name, m.help),
        }
    }
}

/// Runs `call` and records how long it took in the histogram `metric`, labelled with
/// `labels` and `outcome` (`ok` or `error`).
pub async fn timed<T, E>(
    metric: &'static str,
    labels: &[(&'static str, &'static str)],
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let start = std::time::Instant::now();
    let result = call.await;
    let outcome = if result.is_ok() { "ok" } else { "error" };
    let labels: Vec<metrics::Label> = labels
        .iter()
        .map(|(k, v)| metrics::Label::new(*k, *v))
        .chain([metrics::Label::new("outcome", outcome)])
        .collect();
    metrics::histogram!(metric, labels).record(start.elapsed().as_secs_f64());
    result
}

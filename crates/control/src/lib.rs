//! The control plane of vecplane: the config file (TOML -> validated `DataplaneSpec`), the control
//! socket (server and client), the command language of `vecplane ctl` and the stats exports.
//! It reads the data plane's counters and arms traces through `RuntimeView`; it never touches packets.
#![deny(missing_docs)]

pub mod announcer;
pub mod api;
pub mod api_config;
pub mod bgp;
pub mod capture;
pub mod client;
pub mod commands;
pub mod config;
mod fibview;
pub mod flows_api;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod health;
pub mod health_host;
pub mod lb_api;
mod lb_show;
pub mod metrics;
pub mod policies_api;
pub mod punt_api;
pub mod registry;
pub mod reload;
pub mod routes_api;
pub mod server;
pub mod stats;
mod table;
#[cfg(any(test, feature = "fuzzing"))]
#[cfg_attr(not(test), allow(dead_code))]
mod testutil;

pub use api_config::ApiConfig;
pub use client::{http, request, request_at, ClientError, Endpoint, HttpReply};
pub use commands::{parse_command, Command, CommandError, Control, Reply};
pub use config::{
    check_files, live_diff, load_config, parse_config, Config, ConfigError, Issue, LiveDiff,
    NotLive,
};
pub use server::{ControlSocket, ServerError, ServerHandle, DEFAULT_SOCKET};
pub use stats::final_stats_json;

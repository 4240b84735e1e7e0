//! `ApiError`: the one error body every failing API request gets,
//! `{"error":{"status","message","field","item"}}`, and the conversions into it from the
//! routes model, the command language and axum's own rejections. It never decides what is
//! valid: the handlers and the models do.

use crate::routes_api::ModelError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map};

/// An API failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What was wrong and what is accepted.
    pub message: String,
    /// The request field at fault, if one.
    pub field: Option<String>,
    /// The batch item at fault, if one.
    pub item: Option<usize>,
}

impl ApiError {
    /// A failure with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            field: None,
            item: None,
        }
    }

    /// 400 naming `field`.
    pub fn bad(field: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            field: Some(field.to_string()),
            ..ApiError::new(StatusCode::BAD_REQUEST, message)
        }
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// The body.
    pub fn body(&self) -> serde_json::Value {
        let mut e = Map::new();
        e.insert("status".into(), json!(self.status.as_u16()));
        e.insert("message".into(), json!(self.message));
        if let Some(f) = &self.field {
            e.insert("field".into(), json!(f));
        }
        if let Some(i) = self.item {
            e.insert("item".into(), json!(i));
        }
        json!({ "error": e })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

impl From<ModelError> for ApiError {
    fn from(e: ModelError) -> ApiError {
        ApiError {
            status: StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
            message: e.message,
            field: e.field,
            item: e.item,
        }
    }
}

/// A JSON body that could not be decoded: where, and what was expected.
pub fn json_error(e: &serde_json::Error) -> ApiError {
    let what = match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => "malformed JSON",
        serde_json::error::Category::Data => "unexpected content",
        serde_json::error::Category::Io => "unreadable body",
    };
    ApiError::bad(
        "body",
        format!("{what} at line {} column {}: {e}", e.line(), e.column()),
    )
}

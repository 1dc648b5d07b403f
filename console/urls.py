from django.contrib import admin
from django.urls import include, path

from workflows.api import api

from .health import favicon, healthz
from .prometheus import metrics_endpoint

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    path("metrics", metrics_endpoint, name="metrics"),
    path("", include("console.ui_urls")),
]

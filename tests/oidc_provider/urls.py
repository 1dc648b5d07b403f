from django.urls import include, path

from . import views

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("login/", views.login),
    path("control/user", views.control_user),
    path("control/tamper", views.control_tamper),
    path("control/logout-token", views.control_logout_token),
]

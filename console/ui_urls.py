from django.contrib.auth import views as auth_views
from django.urls import path

from . import breach_views, dashboards, notification_views, runbook_views, views, workflow_views
from .roles import public

urlpatterns = [
    path("", views.queue, name="queue"),
    path("login/", public(views.Login.as_view()), name="login"),
    path("logout/", public(auth_views.LogoutView.as_view()), name="logout"),
    path("mine/", views.mine, name="mine"),
    path("checkpoints/<int:pk>/", views.workbench, name="workbench"),
    path("checkpoints/<int:pk>/claim/", views.claim, name="claim"),
    path("checkpoints/bulk/", views.bulk, name="bulk"),
    path("checkpoints/<int:pk>/comment/", views.comment, name="comment"),
    path("checkpoints/<int:pk>/release/", views.release, name="release"),
    path("checkpoints/<int:pk>/assign/", views.assign, name="assign"),
    path("checkpoints/<int:pk>/decide/", views.decide, name="decide"),
    path("decisions/<int:pk>/approve/", views.approve, name="approve"),
    path("decisions/<int:pk>/reject/", views.reject, name="reject"),
    path("breaches/", breach_views.breach_review, name="breach_review"),
    path("breaches/<int:pk>/reason/", breach_views.explain_breach, name="explain_breach"),
    path("runbooks/", runbook_views.runbooks, name="runbooks"),
    path("runbooks/new/", runbook_views.runbook_new, name="runbook_new"),
    path("runbooks/preview/", runbook_views.runbook_preview, name="runbook_preview"),
    path("runbooks/<int:pk>/", runbook_views.runbook, name="runbook"),
    path("runbooks/<int:pk>/edit/", runbook_views.runbook_edit, name="runbook_edit"),
    path("runbooks/<int:pk>/diff/", runbook_views.runbook_diff, name="runbook_diff"),
    path("runbooks/<int:pk>/versions/<int:number>/", runbook_views.runbook_version, name="runbook_version"),
    path("notifications/", notification_views.notifications, name="notifications"),
    path("notifications/<int:pk>/read/", notification_views.mark_read, name="mark_notification_read"),
    path("search/", workflow_views.search, name="search"),
    path("workflows/<int:pk>/", workflow_views.workflow_page, name="workflow"),
    path("workflows/<int:pk>/complete/", views.complete_handoff, name="complete_handoff"),
    path("workflows/<int:pk>/replay/", workflow_views.request_replay, name="request_replay"),
    path("workflows/<int:pk>/fork/", workflow_views.fork, name="fork"),
    path("replays/<int:pk>/", workflow_views.replay_page, name="replay"),
    path("replays/<int:pk>/cancel/", workflow_views.cancel_replay, name="cancel_replay"),
    path("resumes/", dashboards.resumes, name="resumes"),
    path("resumes/workflows/", dashboards.resume_workflows, name="resume_workflows"),
    path("resumes/export/<slug:table>.csv", dashboards.resume_export, name="resume_export"),
    path("readiness/", dashboards.readiness, name="readiness"),
    path("staffing/", dashboards.staffing_budget, name="staffing"),
]

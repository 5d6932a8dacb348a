-- Argo CD health of a DaemonJob (daemonjob.io), read from the conditions kstatus reads:
--   Progressing  the controller has not observed the latest generation yet, or Reconciling=True
--   Degraded     Stalled=True or Failed=True (a refused spec, the failure budget exhausted,
--                failed nodes in a finished rollout, a failed canary, ...)
--   Suspended    spec.suspend, or a canary waiting for a promote (Reconciling reason CanaryPaused)
--   Healthy      Complete=True; a scheduled DaemonJob waiting for its first tick (as kstatus: Current)
-- Argo CD runs it with gopher-lua (Lua 5.1) and few libraries, never string: only base and
-- table functions here, no string methods. The object is `obj`; the script returns `hs`.
local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function is_true(c)
  return c ~= nil and c.status == "True"
end

-- "Reason: message", as the condition says it
local function said(c)
  local reason = c.reason or c.type
  if c.message == nil or c.message == "" then
    return reason
  end
  return reason .. ": " .. c.message
end

local status = obj.status
local generation = obj.metadata.generation
if status == nil or status.observedGeneration == nil or (generation ~= nil and status.observedGeneration ~= generation) then
  hs.status = "Progressing"
  if generation ~= nil then
    hs.message = "waiting for the controller to observe generation " .. tostring(generation)
  else
    hs.message = "waiting for the controller to observe the DaemonJob"
  end
  return hs
end

local stalled = condition(status, "Stalled")
if is_true(stalled) then
  hs.status = "Degraded"
  hs.message = said(stalled)
  return hs
end
local failed = condition(status, "Failed")
if is_true(failed) then
  hs.status = "Degraded"
  hs.message = said(failed)
  return hs
end

local reconciling = condition(status, "Reconciling")
local complete = condition(status, "Complete")
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  if reconciling ~= nil and reconciling.reason == "Suspended" then
    hs.message = said(reconciling)
  elseif complete ~= nil then
    hs.message = "Suspended: " .. said(complete)
  else
    hs.message = "Suspended"
  end
  return hs
end

if is_true(reconciling) then
  if reconciling.reason == "CanaryPaused" then
    hs.status = "Suspended"
  else
    hs.status = "Progressing"
  end
  hs.message = said(reconciling)
  return hs
end

if complete == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the controller to report the rollout"
  return hs
end
-- Complete=True, or nothing in progress and nothing stalled (a scheduled DaemonJob before its
-- first tick): kstatus reads both as Current
hs.status = "Healthy"
hs.message = said(complete)
return hs
